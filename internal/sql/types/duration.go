package types

import (
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"
	"github.com/strata-db/strata/internal/sql/sqlerr"
)

// TIME values (KindDuration): a signed number of microseconds within
// MySQL's range, -838:59:59 to 838:59:59, and the fractional digits the
// value shows (fsp). The Datum keeps both in its integer word as
// micros*8 + fsp, so it stays 24 bytes and the order of the word is the
// order of the times for one fsp.

// MaxDurationMicros is 838:59:59, the largest TIME.
const MaxDurationMicros = (838*3600 + 59*60 + 59) * 1000000

// NewDuration returns a TIME datum of micros microseconds showing fsp
// fractional digits.
func NewDuration(micros int64, fsp int) Datum {
	return Datum{k: KindDuration, i: micros<<3 | int64(fsp&7)}
}

// Duration returns the microseconds and fsp of a TIME datum.
func (d Datum) Duration() (micros int64, fsp int) { return d.i >> 3, int(d.i & 7) }

// DurationWord is the packed word of a TIME datum (codec stores it).
func (d Datum) DurationWord() int64 { return d.i }

// NewDurationWord rebuilds a TIME datum from DurationWord.
func NewDurationWord(w int64) Datum { return Datum{k: KindDuration, i: w} }

// AppendDuration appends [-]HH:MM:SS[.ffffff] with fsp fractional digits.
func AppendDuration(buf []byte, micros int64, fsp int) []byte {
	if micros < 0 {
		buf = append(buf, '-')
		micros = -micros
	}
	secs := micros / 1000000
	buf = appendPadded(buf, int(secs/3600), 2)
	buf = append(buf, ':')
	buf = appendPadded(buf, int(secs/60%60), 2)
	buf = append(buf, ':')
	buf = appendPadded(buf, int(secs%60), 2)
	if fsp > 0 {
		buf = append(buf, '.')
		var tmp [8]byte
		frac := appendPadded(tmp[:0], int(micros%1000000), 6)
		buf = append(buf, frac[:fsp]...)
	}
	return buf
}

// roundMicros rounds micros to fsp fractional digits, half away from zero.
func roundMicros(micros int64, fsp int) int64 {
	unit := int64(fspUnit(fsp))
	if unit == 1 {
		return micros
	}
	neg := micros < 0
	if neg {
		micros = -micros
	}
	micros = (micros + unit/2) / unit * unit
	if neg {
		return -micros
	}
	return micros
}

// ErrBadDuration is a text that is no TIME value.
var errBadDuration = sqlerr.New(sqlerr.ErTruncatedWrongValue, "22007", "Incorrect time value")

// ParseDuration parses a TIME literal: [-][D ]HH:MM[:SS[.frac]], a
// datetime's time part, or undelimited [-]HHMMSS[.frac] / MMSS / SS. The
// result is rounded to fsp digits; ok=false when the text is no time at
// all; clipped=true when it lay outside the TIME range (and was clipped to
// its bound, as MySQL does).
func ParseDuration(s string, fsp int) (micros int64, clipped, ok bool) {
	s = strings.TrimSpace(s)
	neg := false
	if strings.HasPrefix(s, "-") {
		neg = true
		s = strings.TrimSpace(s[1:])
	}
	if s == "" {
		return 0, false, false
	}
	// A full datetime: its time part.
	if len(s) >= 10 && s[4] == '-' && (strings.Contains(s, " ") || strings.Contains(s, "T")) {
		if t, err := ParseTime(s, mysql.TypeDatetime, MaxFsp); err == nil {
			m := (int64(t.Hour())*3600+int64(t.Minute())*60+int64(t.Second()))*1000000 + int64(t.Microsecond())
			return roundMicros(m, fsp), false, true
		}
	}
	frac := int64(0)
	if i := strings.IndexByte(s, '.'); i >= 0 {
		f := s[i+1:]
		s = s[:i]
		if f != "" {
			for _, c := range f {
				if c < '0' || c > '9' {
					return 0, false, false
				}
			}
			// Keep 7 digits to round the 6th.
			digits := f
			if len(digits) > 7 {
				digits = digits[:7]
			}
			for len(digits) < 7 {
				digits += "0"
			}
			v, _ := strconv.ParseInt(digits, 10, 64)
			frac = v // in tenths of a microsecond
		}
	}
	var days, h, m, sec int64
	if strings.ContainsRune(s, ':') {
		dayPart := int64(0)
		if i := strings.IndexByte(s, ' '); i >= 0 {
			v, err := strconv.ParseInt(s[:i], 10, 64)
			if err != nil {
				return 0, false, false
			}
			dayPart = v
			s = strings.TrimSpace(s[i+1:])
		}
		parts := strings.Split(s, ":")
		if len(parts) > 3 {
			return 0, false, false
		}
		var vals [3]int64
		for i, p := range parts {
			v, err := strconv.ParseInt(p, 10, 64)
			if err != nil || v < 0 {
				return 0, false, false
			}
			vals[i] = v
		}
		days, h, m, sec = dayPart, vals[0], vals[1], vals[2]
		if m > 59 || sec > 59 {
			return 0, false, false
		}
	} else {
		for _, c := range s {
			if c < '0' || c > '9' {
				return 0, false, false
			}
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, false, false
		}
		h, m, sec = v/10000, v/100%100, v%100
		if m > 59 || sec > 59 {
			return 0, false, false
		}
	}
	total := ((days*24+h)*3600+m*60+sec)*1000000*10 + frac
	micros = (total + 5) / 10
	micros = roundMicros(micros, fsp)
	if micros > MaxDurationMicros {
		micros, clipped = MaxDurationMicros, true
	}
	if neg {
		micros = -micros
	}
	return micros, clipped, true
}

// durationFromNumber reads a number as [-]HHMMSS[.frac].
func durationFromNumber(d Datum, fsp int) (int64, bool, bool) {
	dec, err := d.ToDecimal()
	if err != nil {
		return 0, false, false
	}
	var buf [64]byte
	return ParseDuration(string(dec.Append(buf[:0])), fsp)
}

// durationToNumber is MySQL's numeric form of a TIME: HHMMSS, with the
// fraction when fsp > 0.
func durationToNumber(micros int64, fsp int) Datum {
	neg := micros < 0
	if neg {
		micros = -micros
	}
	secs := micros / 1000000
	v := secs/3600*10000 + secs/60%60*100 + secs%60
	if fsp > 0 {
		dv := NewDecimalFromInt(v*1000000 + micros%1000000)
		dv.scale = 6
		dv = dv.Truncate(fsp)
		if neg {
			dv = dv.Neg()
		}
		return NewDecimal(dv)
	}
	if neg {
		v = -v
	}
	return NewInt(v)
}

// DurationNumber is a TIME's numeric form (HHMMSS[.frac]).
func DurationNumber(d Datum) Datum { return durationToNumber(d.Duration()) }

// DurationOf returns the TIME value of a DATETIME (its time of day).
func DurationOf(t Time) Datum {
	m := (int64(t.Hour())*3600+int64(t.Minute())*60+int64(t.Second()))*1000000 + int64(t.Microsecond())
	return NewDuration(m, t.Fsp())
}

func (c converter) toDuration(d Datum) (Datum, error) {
	fsp := c.ft.GetDecimal()
	if fsp < 0 || fsp > MaxFsp {
		fsp = 0
	}
	var micros int64
	var clipped, ok bool
	switch d.k {
	case KindDuration:
		m, _ := d.Duration()
		micros, ok = roundMicros(m, fsp), true
	case KindTime:
		m, _ := DurationOf(d.Time()).Duration()
		micros, ok = roundMicros(m, fsp), true
	case KindString, KindBytes:
		micros, clipped, ok = ParseDuration(string(d.b()), fsp)
	default:
		micros, clipped, ok = durationFromNumber(d, fsp)
	}
	if !ok || clipped {
		return Datum{}, sqlerr.New(sqlerr.ErTruncatedWrongValue, "22007", "Incorrect time value: '%s' for column '%s' at row %d", string(d.AppendText(nil)), c.col, c.row)
	}
	return NewDuration(micros, fsp), nil
}

// durationType is the column type of a TIME value of fsp digits.
func durationType(fsp int) *ptypes.FieldType {
	ft := ptypes.NewFieldType(mysql.TypeDuration)
	w := 10
	if fsp > 0 {
		w += fsp + 1
	}
	ft.SetFlen(w)
	ft.SetDecimal(fsp)
	setBinary(ft)
	return ft
}

// compareDuration compares a TIME with another value: TIME with TIME by
// value, with text parsed as a TIME (compared as text when it is none),
// with anything else as numbers.
func compareDuration(a, b Datum) int {
	am, afsp := a.Duration()
	switch b.k {
	case KindDuration:
		bm, _ := b.Duration()
		return cmpInt64(am, bm)
	case KindString, KindBytes:
		if bm, _, ok := ParseDuration(string(b.b()), MaxFsp); ok {
			return cmpInt64(am, bm)
		}
		return strings.Compare(string(a.AppendText(nil)), string(b.b()))
	case KindTime:
		bm, _ := DurationOf(b.Time()).Duration()
		return cmpInt64(am, bm)
	}
	c, _ := Compare(durationToNumber(am, afsp), b)
	return c
}
