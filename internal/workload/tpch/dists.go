package tpch

import (
	"strconv"
	"strings"
)

// The value lists of clause 4.2.2.13 and 4.2.3.

// colors are the 92 words of P_NAME.
var colors = strings.Fields(`almond antique aquamarine azure beige bisque black blanched blue blush
brown burlywood burnished chartreuse chiffon chocolate coral cornflower cornsilk cream cyan dark deep
dim dodger drab firebrick floral forest frosted gainsboro ghost goldenrod green grey honeydew hot
indian ivory khaki lace lavender lawn lemon light lime linen magenta maroon medium metallic midnight
mint misty moccasin navajo navy olive orange orchid pale papaya peach peru pink plum powder puff
purple red rose rosy royal saddle salmon sandy seashell sienna sky slate smoke snow spring steel tan
thistle tomato turquoise violet wheat white yellow`)

var (
	typeS1       = []string{"STANDARD", "SMALL", "MEDIUM", "LARGE", "ECONOMY", "PROMO"}
	typeS2       = []string{"ANODIZED", "BURNISHED", "PLATED", "POLISHED", "BRUSHED"}
	typeS3       = []string{"TIN", "NICKEL", "BRASS", "STEEL", "COPPER"}
	containerS1  = []string{"SM", "LG", "MED", "JUMBO", "WRAP"}
	containerS2  = []string{"CASE", "BOX", "BAG", "JAR", "PKG", "PACK", "CAN", "DRUM"}
	segments     = []string{"AUTOMOBILE", "BUILDING", "FURNITURE", "MACHINERY", "HOUSEHOLD"}
	priorities   = []string{"1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"}
	instructions = []string{"DELIVER IN PERSON", "COLLECT COD", "NONE", "TAKE BACK RETURN"}
	modes        = []string{"REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB"}
)

// nations are N_NAME and N_REGIONKEY by N_NATIONKEY; regions are R_NAME by
// R_REGIONKEY (clause 4.2.3).
var (
	nations = []struct {
		name   string
		region int
	}{
		{"ALGERIA", 0}, {"ARGENTINA", 1}, {"BRAZIL", 1}, {"CANADA", 1}, {"EGYPT", 4}, {"ETHIOPIA", 0},
		{"FRANCE", 3}, {"GERMANY", 3}, {"INDIA", 2}, {"INDONESIA", 2}, {"IRAN", 4}, {"IRAQ", 4},
		{"JAPAN", 2}, {"JORDAN", 4}, {"KENYA", 0}, {"MOROCCO", 0}, {"MOZAMBIQUE", 0}, {"PERU", 1},
		{"CHINA", 2}, {"ROMANIA", 3}, {"SAUDI ARABIA", 4}, {"VIETNAM", 2}, {"RUSSIA", 3},
		{"UNITED KINGDOM", 3}, {"UNITED STATES", 1},
	}
	regions = []string{"AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST"}
)

// weighted is a word list with weights, written "word:weight, ...".
type weighted struct {
	words []string
	cum   []int
}

func newWeighted(spec string) weighted {
	var w weighted
	total := 0
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		word, n := item, 1
		if i := strings.LastIndexByte(item, ':'); i > 0 {
			word = item[:i]
			n, _ = strconv.Atoi(item[i+1:])
		}
		total += n
		w.words = append(w.words, word)
		w.cum = append(w.cum, total)
	}
	return w
}

func (w weighted) draw(r rng) string {
	x := r.IntN(w.cum[len(w.cum)-1])
	lo, hi := 0, len(w.cum)-1
	for lo < hi {
		m := (lo + hi) / 2
		if w.cum[m] > x {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return w.words[lo]
}

// The grammar's word classes. The weights follow the reference generator's
// shape (a few frequent words, a long tail of rare ones); they are not its
// exact figures.
var (
	nouns = newWeighted(`packages:40, requests:40, accounts:40, deposits:40, foxes:20, ideas:20,
		theodolites:20, pinto beans:20, instructions:20, dependencies:10, excuses:10, platelets:10,
		asymptotes:10, courts:5, dolphins:5, multipliers, sauternes, warthogs, frets, dinos,
		attainments, somas, Tiresias, patterns, forges, braids, hockey players, frays, warhorses,
		dugouts, notornis, epitaphs, pearls, tithes, waters, orbits, gifts, sheaves, depths,
		sentiments, decoys, realms, pains, grouches, escapades`)
	verbs = newWeighted(`sleep:20, wake:20, are:20, cajole:20, haggle:20, nag:10, use:10, boost:10,
		affix:5, detect:5, integrate:5, maintain, nod, was, lose, sublate, solve, thrash, promise,
		engage, hinder, print, x-ray, breach, eat, grow, impress, mold, poach, serve, run, dazzle,
		snooze, doze, unwind, kindle, play, hang, believe, doubt`)
	adjectives = newWeighted(`special:20, pending:20, unusual:20, express:20, furious, sly, careful,
		blithe, quick, fluffy, slow, quiet, ruthless, thin, close, dogged, daring, brave, stealthy,
		permanent, enticing, idle, busy, regular:50, final:40, ironic:40, even:30, bold:20, silent:10`)
	adverbs = newWeighted(`sometimes, always, never, furiously:50, slyly:50, carefully:50,
		blithely:40, quickly:30, fluffily:20, slowly, quietly, ruthlessly, thinly, closely,
		doggedly, daringly, bravely, stealthily, permanently, enticingly, idly, busily, regularly,
		finally, ironically, evenly, boldly, silently`)
	prepositions = newWeighted(`about:50, above:50, according to:50, across:50, after:50,
		against:40, along:40, alongside of:30, among:30, around:20, at:10, atop, before, behind,
		beneath, beside, besides, between, beyond, by, despite, during, except, for, from,
		in place of, inside, instead of, into, near, of, on, outside, over, past, since, through,
		throughout, to, toward, under, until, up, upon, without, with, within`)
	auxiliaries = newWeighted(`do, may, might, shall, will, would, can, could, should, ought to,
		must, will have to, shall have to, could have to, should have to, must have to, need to,
		try to`)
	terminators = newWeighted(`.:50, ;:1, ::1, ?:1, !:1, --:1`)
)
