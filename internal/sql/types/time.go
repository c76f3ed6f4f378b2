package types

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/pingcap/tidb/pkg/parser/mysql"
)

// Time is a DATE, DATETIME or TIMESTAMP value with its fractional-second
// precision, packed into 64 bits so that ordering the packed values as
// uint64 orders the moments they denote:
//
//	bits 63..47 year*13+month | 46..42 day | 41..37 hour | 36..31 minute |
//	30..25 second | 24..5 microsecond | 4..3 type | 2..0 fsp
//
// The low five bits (type and fsp) only break ties; Compare ignores them, so
// DATE '2020-01-01' equals DATETIME '2020-01-01 00:00:00' as in MySQL.
// TIMESTAMP values are kept in session-local wall-clock form like DATETIME;
// the time zone is the session's concern, not the value's.
type Time uint64

// ErrBadTime is returned for text that is not a valid date or datetime.
var ErrBadTime = errors.New("invalid date/time value")

const (
	timeTypeDate      = 1
	timeTypeDatetime  = 2
	timeTypeTimestamp = 3
	// MaxFsp is the largest fractional-second precision.
	MaxFsp = 6
)

func timeTypeCode(tp byte) uint64 {
	switch tp {
	case mysql.TypeDate, mysql.TypeNewDate:
		return timeTypeDate
	case mysql.TypeTimestamp:
		return timeTypeTimestamp
	default:
		return timeTypeDatetime
	}
}

// NewTimeFromParts validates the fields and packs them. For DATE the clock
// fields are dropped. The all-zero date (0000-00-00) is accepted.
func NewTimeFromParts(year, month, day, hour, minute, second, micro int, tp byte, fsp int) (Time, error) {
	if fsp < 0 || fsp > MaxFsp {
		return 0, ErrBadTime
	}
	zero := year == 0 && month == 0 && day == 0
	if !zero {
		if year < 0 || year > 9999 || month < 1 || month > 12 || day < 1 || day > daysIn(year, month) {
			return 0, ErrBadTime
		}
	}
	if hour < 0 || hour > 23 || minute < 0 || minute > 59 || second < 0 || second > 59 || micro < 0 || micro > 999999 {
		return 0, ErrBadTime
	}
	code := timeTypeCode(tp)
	if code == timeTypeDate {
		hour, minute, second, micro, fsp = 0, 0, 0, 0, 0
	}
	ym := uint64(year*13 + month)
	v := ym<<47 | uint64(day)<<42 | uint64(hour)<<37 | uint64(minute)<<31 | uint64(second)<<25 | uint64(micro)<<5 | code<<3 | uint64(fsp)
	return Time(v), nil
}

func daysIn(year, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// Year returns the year.
func (t Time) Year() int { return int(t>>47) / 13 }

// Month returns the month 1-12 (0 for the zero date).
func (t Time) Month() int { return int(t>>47) % 13 }

// Day returns the day of month.
func (t Time) Day() int { return int(t>>42) & 31 }

// Hour returns the hour.
func (t Time) Hour() int { return int(t>>37) & 31 }

// Minute returns the minute.
func (t Time) Minute() int { return int(t>>31) & 63 }

// Second returns the second.
func (t Time) Second() int { return int(t>>25) & 63 }

// Microsecond returns the fractional second in microseconds.
func (t Time) Microsecond() int { return int(t>>5) & (1<<20 - 1) }

// Fsp returns the fractional-second precision (0-6).
func (t Time) Fsp() int { return int(t & 7) }

// Type returns mysql.TypeDate, mysql.TypeDatetime or mysql.TypeTimestamp.
func (t Time) Type() byte {
	switch (t >> 3) & 3 {
	case timeTypeDate:
		return mysql.TypeDate
	case timeTypeTimestamp:
		return mysql.TypeTimestamp
	}
	return mysql.TypeDatetime
}

// IsZero reports whether t is the zero date 0000-00-00.
func (t Time) IsZero() bool { return t>>42 == 0 }

// Compare orders two times by the moment they denote, ignoring type and fsp.
func (t Time) Compare(o Time) int {
	a, b := t>>5, o>>5
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// GoTime returns t as a time.Time in loc.
func (t Time) GoTime(loc *time.Location) time.Time {
	return time.Date(t.Year(), time.Month(t.Month()), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Microsecond()*1000, loc)
}

// TimeFromGo converts a time.Time (its wall clock in its own location),
// rounding the fraction to fsp digits.
func TimeFromGo(g time.Time, tp byte, fsp int) (Time, error) {
	g = g.Round(time.Duration(fspUnit(fsp)) * time.Microsecond)
	return NewTimeFromParts(g.Year(), int(g.Month()), g.Day(), g.Hour(), g.Minute(), g.Second(), g.Nanosecond()/1000, tp, fsp)
}

func fspUnit(fsp int) int {
	u := 1
	for i := fsp; i < MaxFsp; i++ {
		u *= 10
	}
	return u
}

// WithType converts t to another temporal type and precision, rounding the
// fraction (and carrying into seconds, days...) as MySQL does.
func (t Time) WithType(tp byte, fsp int) (Time, error) {
	if fsp < 0 || fsp > MaxFsp {
		return 0, ErrBadTime
	}
	if timeTypeCode(tp) == timeTypeDate {
		return NewTimeFromParts(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, tp, 0)
	}
	micro := t.Microsecond()
	if unit := fspUnit(fsp); micro%unit != 0 {
		if t.IsZero() {
			return NewTimeFromParts(0, 0, 0, t.Hour(), t.Minute(), t.Second(), micro-micro%unit, tp, fsp)
		}
		return TimeFromGo(t.GoTime(time.UTC), tp, fsp)
	}
	return NewTimeFromParts(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), micro, tp, fsp)
}

// String renders t the way MySQL prints it: 2006-01-02 or
// 2006-01-02 15:04:05[.ffffff] with exactly Fsp() fractional digits.
func (t Time) String() string { return string(t.Append(nil)) }

func appendPadded(buf []byte, v, width int) []byte {
	var tmp [8]byte
	s := strconv.AppendInt(tmp[:0], int64(v), 10)
	for i := len(s); i < width; i++ {
		buf = append(buf, '0')
	}
	return append(buf, s...)
}

// Append appends the text form of t to buf.
func (t Time) Append(buf []byte) []byte {
	buf = appendPadded(buf, t.Year(), 4)
	buf = append(buf, '-')
	buf = appendPadded(buf, t.Month(), 2)
	buf = append(buf, '-')
	buf = appendPadded(buf, t.Day(), 2)
	if t.Type() == mysql.TypeDate {
		return buf
	}
	buf = append(buf, ' ')
	buf = appendPadded(buf, t.Hour(), 2)
	buf = append(buf, ':')
	buf = appendPadded(buf, t.Minute(), 2)
	buf = append(buf, ':')
	buf = appendPadded(buf, t.Second(), 2)
	if fsp := t.Fsp(); fsp > 0 {
		buf = append(buf, '.')
		var tmp [8]byte
		frac := appendPadded(tmp[:0], t.Microsecond(), 6)
		buf = append(buf, frac[:fsp]...)
	}
	return buf
}

// ToNumber returns t as MySQL's numeric form: YYYYMMDD for DATE,
// YYYYMMDDhhmmss for DATETIME/TIMESTAMP, with the fraction when fsp > 0.
func (t Time) ToNumber() Datum {
	date := int64(t.Year())*10000 + int64(t.Month())*100 + int64(t.Day())
	if t.Type() == mysql.TypeDate {
		return NewInt(date)
	}
	v := date*1000000 + int64(t.Hour())*10000 + int64(t.Minute())*100 + int64(t.Second())
	if fsp := t.Fsp(); fsp > 0 {
		d := NewDecimalFromInt(v*1000000 + int64(t.Microsecond()))
		d.scale = 6
		return NewDecimal(d.Truncate(fsp))
	}
	return NewInt(v)
}

// ParseTime parses a date or datetime literal for a column or value of type
// tp (mysql.TypeDate, TypeDatetime or TypeTimestamp) with fsp fractional
// digits. Accepted forms are MySQL's: delimited ('2020-1-2 3:04:05.6',
// any punctuation as delimiter, 'T' between date and time), two-digit years
// (70-99 -> 19xx, 00-69 -> 20xx), and undelimited digit strings
// (YYYYMMDD, YYMMDD, YYYYMMDDhhmmss, YYMMDDhhmmss, optionally with .frac).
// For DATE, a time part is accepted and dropped. The fraction is rounded to fsp.
func ParseTime(s string, tp byte, fsp int) (Time, error) {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	if s == "" {
		return 0, ErrBadTime
	}
	var fields [6]int
	var widths [6]int
	n := 0
	frac, fracDigits := 0, 0
	allDigits := true
	for i := 0; i < len(s); i++ {
		if (s[i] < '0' || s[i] > '9') && s[i] != '.' {
			allDigits = false
			break
		}
	}
	intPart := s
	fracPart := ""
	if allDigits {
		if dot := indexByte(s, '.'); dot >= 0 {
			intPart, fracPart = s[:dot], s[dot+1:]
		}
		switch len(intPart) {
		case 14, 12, 8, 6:
		default:
			return 0, ErrBadTime
		}
		yw := 4
		if len(intPart) == 12 || len(intPart) == 6 {
			yw = 2
		}
		pos := 0
		for pos < len(intPart) {
			w := 2
			if n == 0 {
				w = yw
			}
			v, _ := strconv.Atoi(intPart[pos : pos+w])
			fields[n], widths[n] = v, w
			n++
			pos += w
		}
		if fracPart != "" && len(intPart) < 12 {
			return 0, ErrBadTime
		}
	} else {
		i := 0
		for i < len(s) && n < 6 {
			if s[i] < '0' || s[i] > '9' {
				return 0, ErrBadTime
			}
			start := i
			v := 0
			for i < len(s) && s[i] >= '0' && s[i] <= '9' {
				if i-start < 9 {
					v = v*10 + int(s[i]-'0')
				}
				i++
			}
			fields[n], widths[n] = v, i-start
			n++
			if i == len(s) {
				break
			}
			if n == 6 {
				if s[i] != '.' {
					return 0, ErrBadTime
				}
				fracPart = s[i+1:]
				break
			}
			sep := s[i]
			if n == 3 && sep != ' ' && sep != 'T' && !isPunct(sep) {
				return 0, ErrBadTime
			}
			if n != 3 && !isPunct(sep) {
				return 0, ErrBadTime
			}
			i++
			if n == 3 {
				for i < len(s) && (s[i] == ' ' || s[i] == 'T') {
					i++
				}
			}
			if i == len(s) {
				break
			}
		}
		if n < 3 {
			return 0, ErrBadTime
		}
	}
	for i := 0; i < len(fracPart); i++ {
		if fracPart[i] < '0' || fracPart[i] > '9' {
			return 0, ErrBadTime
		}
	}
	// Keep 7 digits so the 6th can be rounded.
	for i := 0; i < len(fracPart) && i < 7; i++ {
		frac = frac*10 + int(fracPart[i]-'0')
		fracDigits++
	}
	for ; fracDigits < 7; fracDigits++ {
		frac *= 10
	}
	micro := frac / 10
	if frac%10 >= 5 {
		micro++
	}
	year := fields[0]
	if widths[0] <= 2 {
		if year < 70 {
			year += 2000
		} else {
			year += 1900
		}
	}
	carry := false
	if micro == 1000000 {
		micro = 999999
		carry = true
	}
	t, err := NewTimeFromParts(year, fields[1], fields[2], fields[3], fields[4], fields[5], micro, mysql.TypeDatetime, MaxFsp)
	if err != nil {
		return 0, err
	}
	if carry {
		g := t.GoTime(time.UTC).Add(time.Microsecond)
		if t, err = TimeFromGo(g, mysql.TypeDatetime, MaxFsp); err != nil {
			return 0, err
		}
	}
	return t.WithType(tp, fsp)
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

func isPunct(c byte) bool {
	return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') || (c >= '{' && c <= '~')
}

// ParseTimeZone resolves a MySQL time zone name: 'SYSTEM' (the process's
// local zone), an offset '+HH:MM'/'-HH:MM' (within -13:59..+14:00), 'UTC',
// or an IANA name such as 'Europe/Paris' when the zone database is available.
func ParseTimeZone(name string) (*time.Location, error) {
	switch {
	case name == "" || strings.EqualFold(name, "SYSTEM"):
		return time.Local, nil
	case strings.EqualFold(name, "UTC"):
		return time.UTC, nil
	case len(name) >= 5 && (name[0] == '+' || name[0] == '-'):
		colon := strings.IndexByte(name, ':')
		if colon < 2 {
			return nil, ErrBadTimeZone
		}
		h, err1 := strconv.Atoi(name[1:colon])
		m, err2 := strconv.Atoi(name[colon+1:])
		if err1 != nil || err2 != nil || m < 0 || m > 59 || h < 0 {
			return nil, ErrBadTimeZone
		}
		secs := h*3600 + m*60
		if name[0] == '-' {
			secs = -secs
		}
		if secs < -(13*3600+59*60) || secs > 14*3600 {
			return nil, ErrBadTimeZone
		}
		return time.FixedZone(name, secs), nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, ErrBadTimeZone
	}
	return loc, nil
}

// ErrBadTimeZone is returned by ParseTimeZone for an unknown zone.
var ErrBadTimeZone = errors.New("unknown or incorrect time zone")

// ConvertTimeZone reinterprets t's wall clock from zone from to zone to
// (CONVERT_TZ, and storing TIMESTAMP values in UTC). Type and fsp are kept.
func (t Time) ConvertTimeZone(from, to *time.Location) (Time, error) {
	if t.IsZero() {
		return t, nil
	}
	g := time.Date(t.Year(), time.Month(t.Month()), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Microsecond()*1000, from).In(to)
	return NewTimeFromParts(g.Year(), int(g.Month()), g.Day(), g.Hour(), g.Minute(), g.Second(), g.Nanosecond()/1000, t.Type(), t.Fsp())
}
