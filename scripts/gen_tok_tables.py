#!/usr/bin/python3
"""
gen_tok_tables.py: writes encoder/tok_tables.h, the static data tables that
encoder/text_clean.c needs to reproduce ftfy 6.3.1 + html.unescape exactly:

  - the HTML5 named character references (Python's html.entities.html5, the
    WHATWG list), used by html.unescape (with and without ';');
  - ftfy's extra all-caps entities (&NTILDE; -> U+00D1, built as ftfy's
    chardata._build_html_entities does);
  - the 128 upper code points of the single-byte codecs ftfy tries, in ftfy's
    order (latin-1, sloppy-windows-125x, iso-8859-2, macroman, cp437), where
    "sloppy" fills undefined bytes with the Latin-1 character (ftfy's
    bad_codecs.sloppy);
  - the character categories of ftfy.badness.MOJIBAKE_CATEGORIES and of
    ftfy.chardata.UTF8_CLUES, as one sorted (code point, bit mask) table;
  - ftfy's WIDTH_MAP (fullwidth/halfwidth forms -> NFKC, U+3000 -> space).

Run by developers only (the C build never needs Python):
    /usr/bin/python3 scripts/gen_tok_tables.py > encoder/tok_tables.h
Everything is computed from Python's own tables plus the category lists below,
which are transcribed from ftfy 6.3.1's badness.py / chardata.py.
"""
import html
import html.entities
import sys
import unicodedata

N = unicodedata.lookup

# ---- ftfy.badness.MOJIBAKE_CATEGORIES (ftfy 6.3.1) ---------------------------
def names(*ns):
    return "".join(N(n) for n in ns)

def rng(a, b):
    return "".join(chr(c) for c in range(ord(a), ord(b) + 1))

CAT = {}
CAT["common"] = names("NO-BREAK SPACE", "SOFT HYPHEN", "MIDDLE DOT", "ACUTE ACCENT",
                      "EN DASH", "EM DASH", "HORIZONTAL BAR", "HORIZONTAL ELLIPSIS",
                      "RIGHT SINGLE QUOTATION MARK")
CAT["c1"] = rng("\x80", "\x9f")
CAT["bad"] = names("BROKEN BAR", "CURRENCY SIGN", "DIAERESIS", "NOT SIGN", "MACRON",
                   "CEDILLA", "LATIN SMALL LETTER F WITH HOOK",
                   "MODIFIER LETTER CIRCUMFLEX ACCENT", "CARON", "BREVE", "OGONEK",
                   "SMALL TILDE", "DAGGER", "DOUBLE DAGGER", "PER MILLE SIGN",
                   "REVERSED NOT SIGN", "LOZENGE") + "\ufffd" + names(
                   "FEMININE ORDINAL INDICATOR", "MASCULINE ORDINAL INDICATOR")
CAT["law"] = names("PILCROW SIGN", "SECTION SIGN")
CAT["currency"] = names("CENT SIGN", "POUND SIGN", "YEN SIGN", "PESETA SIGN", "EURO SIGN")
CAT["start_punctuation"] = names(
    "INVERTED EXCLAMATION MARK", "LEFT-POINTING DOUBLE ANGLE QUOTATION MARK",
    "INVERTED QUESTION MARK", "COPYRIGHT SIGN", "GREEK TONOS", "GREEK DIALYTIKA TONOS",
    "LEFT SINGLE QUOTATION MARK", "SINGLE LOW-9 QUOTATION MARK",
    "LEFT DOUBLE QUOTATION MARK", "DOUBLE LOW-9 QUOTATION MARK", "BULLET",
    "SINGLE LEFT-POINTING ANGLE QUOTATION MARK") + "\uf8ff"
CAT["end_punctuation"] = names(
    "REGISTERED SIGN", "RIGHT-POINTING DOUBLE ANGLE QUOTATION MARK",
    "DOUBLE ACUTE ACCENT", "RIGHT DOUBLE QUOTATION MARK",
    "SINGLE RIGHT-POINTING ANGLE QUOTATION MARK", "TRADE MARK SIGN")
CAT["numeric"] = names(
    "SUPERSCRIPT TWO", "SUPERSCRIPT THREE", "SUPERSCRIPT ONE", "PLUS-MINUS SIGN",
    "VULGAR FRACTION ONE QUARTER", "VULGAR FRACTION ONE HALF",
    "VULGAR FRACTION THREE QUARTERS", "MULTIPLICATION SIGN", "MICRO SIGN",
    "DIVISION SIGN", "FRACTION SLASH", "PARTIAL DIFFERENTIAL", "INCREMENT",
    "N-ARY PRODUCT", "N-ARY SUMMATION", "SQUARE ROOT", "INFINITY", "INTERSECTION",
    "INTEGRAL", "ALMOST EQUAL TO", "NOT EQUAL TO", "IDENTICAL TO",
    "LESS-THAN OR EQUAL TO", "GREATER-THAN OR EQUAL TO", "NUMERO SIGN")
CAT["kaomoji"] = (rng("Ò", "Ö") + rng("Ù", "Ü") + rng("ò", "ö") + rng("ø", "ü") + names(
    "LATIN CAPITAL LETTER O WITH DOUBLE ACUTE", "LATIN CAPITAL LETTER O WITH MACRON",
    "LATIN CAPITAL LETTER U WITH MACRON", "LATIN CAPITAL LETTER U WITH OGONEK",
    "DEGREE SIGN"))
CAT["upper_accented"] = rng("\xc0", "\xd1") + names(*("LATIN CAPITAL LETTER " + s for s in [
    "O WITH STROKE", "U WITH DIAERESIS", "Y WITH ACUTE", "A WITH BREVE", "A WITH MACRON",
    "A WITH OGONEK", "C WITH ACUTE", "C WITH CARON", "D WITH CARON", "D WITH STROKE",
    "E WITH OGONEK", "E WITH CARON", "E WITH MACRON", "E WITH DOT ABOVE", "G WITH BREVE",
    "G WITH CEDILLA", "I WITH DOT ABOVE", "I WITH MACRON", "K WITH CEDILLA",
    "L WITH ACUTE", "L WITH CARON", "L WITH STROKE", "L WITH CEDILLA", "N WITH ACUTE",
    "N WITH CARON", "N WITH CEDILLA"])) + names("LATIN CAPITAL LIGATURE OE") + names(
    *("LATIN CAPITAL LETTER " + s for s in [
        "R WITH CARON", "S WITH ACUTE", "S WITH CEDILLA", "S WITH CARON", "T WITH CEDILLA",
        "T WITH CARON", "U WITH RING ABOVE", "U WITH DOUBLE ACUTE", "Y WITH DIAERESIS",
        "Z WITH ACUTE", "Z WITH DOT ABOVE", "Z WITH CARON"])) + names(
    "CYRILLIC CAPITAL LETTER GHE WITH UPTURN")
CAT["lower_accented"] = names("LATIN SMALL LETTER SHARP S") + rng("\xe0", "\xf1") + names(
    *("LATIN SMALL LETTER " + s for s in [
        "A WITH BREVE", "A WITH OGONEK", "A WITH MACRON", "C WITH ACUTE", "C WITH CARON",
        "D WITH CARON", "D WITH STROKE", "E WITH OGONEK", "E WITH CARON", "E WITH MACRON",
        "E WITH DOT ABOVE", "G WITH BREVE", "G WITH CEDILLA", "I WITH OGONEK",
        "I WITH MACRON", "K WITH CEDILLA", "L WITH ACUTE", "L WITH CARON", "L WITH STROKE",
        "L WITH CEDILLA"])) + names("LATIN SMALL LIGATURE OE") + names(
    *("LATIN SMALL LETTER " + s for s in [
        "R WITH ACUTE", "S WITH ACUTE", "S WITH CEDILLA", "S WITH CARON", "T WITH CARON",
        "U WITH DIAERESIS", "Z WITH ACUTE", "Z WITH DOT ABOVE", "Z WITH CARON"])) + names(
    "CYRILLIC SMALL LETTER GHE WITH UPTURN", "LATIN SMALL LIGATURE FI",
    "LATIN SMALL LIGATURE FL")
CAT["upper_common"] = names("LATIN CAPITAL LETTER THORN") + rng(
    N("GREEK CAPITAL LETTER ALPHA"), N("GREEK CAPITAL LETTER OMEGA")) + names(
    *("GREEK CAPITAL LETTER " + s for s in [
        "ALPHA WITH TONOS", "EPSILON WITH TONOS", "ETA WITH TONOS", "IOTA WITH TONOS",
        "OMICRON WITH TONOS", "UPSILON WITH TONOS", "OMEGA WITH TONOS",
        "IOTA WITH DIALYTIKA", "UPSILON WITH DIALYTIKA"])) + rng(
    N("CYRILLIC CAPITAL LETTER IO"), N("CYRILLIC CAPITAL LETTER YA"))
CAT["lower_common"] = rng(N("GREEK SMALL LETTER ALPHA"), N("GREEK SMALL LETTER OMEGA")) + names(
    *("GREEK SMALL LETTER " + s for s in [
        "ALPHA WITH TONOS", "EPSILON WITH TONOS", "ETA WITH TONOS", "IOTA WITH TONOS",
        "UPSILON WITH DIALYTIKA AND TONOS"])) + rng(
    N("CYRILLIC SMALL LETTER A"), N("CYRILLIC SMALL LETTER DZHE"))
CAT["box"] = ("│┌┐┘├┤┬┼" + rng(N("BOX DRAWINGS DOUBLE HORIZONTAL"),
                                N("BOX DRAWINGS DOUBLE VERTICAL AND HORIZONTAL"))
              + "▀▄█▌▐░▒▓")

# ---- codecs, in ftfy.chardata.CHARMAP_ENCODINGS order -------------------------
ENCODINGS = [("latin-1", "latin-1", False), ("sloppy-windows-1252", "cp1252", True),
             ("sloppy-windows-1251", "cp1251", True), ("sloppy-windows-1250", "cp1250", True),
             ("sloppy-windows-1253", "cp1253", True), ("sloppy-windows-1254", "cp1254", True),
             ("sloppy-windows-1257", "cp1257", True), ("iso-8859-2", "iso8859_2", False),
             ("macroman", "mac_roman", False), ("cp437", "cp437", False)]

def decode_table(codec, sloppy):
    out = []
    for b in range(256):
        try:
            c = bytes([b]).decode(codec)
        except UnicodeDecodeError:
            assert sloppy
            c = chr(b)
        out.append(c)
    if sloppy:
        out[0x1A] = "\ufffd"
    return out

TABLES = {name: decode_table(codec, sloppy) for name, codec, sloppy in ENCODINGS}
for name, codec, sloppy in ENCODINGS:
    t = TABLES[name]
    assert len(set(t)) == 256, name  # encoding is unambiguous
    for b in range(0x80):
        assert b == 0x1A or t[b] == chr(b), (name, b)

# ---- ftfy.chardata.UTF8_CLUES: derived from the codecs ftfy lists there -------
CLUE_ENCODINGS = ["latin-1", "sloppy-windows-1252", "sloppy-windows-1250",
                  "sloppy-windows-1251", "sloppy-windows-1253", "sloppy-windows-1254",
                  "sloppy-windows-1257"]

def clue(byte_values):
    s = set()
    for e in CLUE_ENCODINGS:
        for b in byte_values:
            c = TABLES[e][b]
            s.add(c)
    return s

CLUES = {}
CLUES["utf8_first_of_2"] = clue(range(0xC2, 0xE0))
CLUES["utf8_first_of_3"] = clue(range(0xE0, 0xF0))
CLUES["utf8_first_of_4"] = clue([0xF0, 0xF3])
CLUES["utf8_continuation"] = clue(range(0x80, 0xC0)) | {" "}
CLUES["utf8_continuation_strict"] = CLUES["utf8_continuation"] - set(names(
    "SPACE", "EN DASH", "EM DASH", "HORIZONTAL BAR", "LEFT SINGLE QUOTATION MARK",
    "RIGHT SINGLE QUOTATION MARK", "SINGLE LOW-9 QUOTATION MARK",
    "LEFT DOUBLE QUOTATION MARK", "RIGHT DOUBLE QUOTATION MARK",
    "DOUBLE LOW-9 QUOTATION MARK", "BULLET", "HORIZONTAL ELLIPSIS"))
# Spot checks against the transcribed ftfy 6.3.1 lists.
assert len(CLUES["utf8_first_of_4"]) == 9
assert N("GREEK CAPITAL LETTER IOTA WITH DIALYTIKA") in CLUES["utf8_first_of_2"]
assert N("MULTIPLICATION SIGN") in CLUES["utf8_first_of_2"]
assert N("HORIZONTAL BAR") in CLUES["utf8_continuation"]
assert N("TRADE MARK SIGN") in CLUES["utf8_continuation_strict"]

BITS = ["common", "c1", "bad", "law", "currency", "start_punctuation", "end_punctuation",
        "numeric", "kaomoji", "upper_accented", "lower_accented", "upper_common",
        "lower_common", "box", "utf8_first_of_2", "utf8_first_of_3", "utf8_first_of_4",
        "utf8_continuation", "utf8_continuation_strict"]

def main():
    w = sys.stdout.write
    w("/*\n** tok_tables.h: GENERATED by scripts/gen_tok_tables.py from Python %s's\n"
      "** html.entities / codecs (Unicode %s) and ftfy 6.3.1's character lists. Do not\n"
      "** edit. Private to encoder/text_clean.c.\n*/\n" % (sys.version.split()[0],
                                                        unicodedata.unidata_version))
    w("#ifndef CDB_TOK_TABLES_H\n#define CDB_TOK_TABLES_H\n\n#include <stdint.h>\n\n")
    for i, b in enumerate(BITS):
        w("#define TT_%s (1u << %d)\n" % (b.upper(), i))
    w("\n")

    def cstr(s):
        out = '"'
        for byte in s.encode("utf-8"):
            if 0x20 <= byte < 0x7F and chr(byte) not in '"\\?':
                out += chr(byte)
            else:
                out += "\\%03o" % byte
        return out + '"'

    # HTML5 entities: name (without '&') -> value, sorted by UTF-8 bytes (strcmp).
    ents = sorted(html.entities.html5.items(), key=lambda kv: kv[0].encode())
    w("typedef struct tt_entity { const char *name; const char *value; } tt_entity;\n")
    w("static const tt_entity tt_html5[] = {\n")
    for k, v in ents:
        w("    {%s, %s},\n" % (cstr(k), cstr(v)))
    w("};\n#define TT_N_HTML5 %d\n\n" % len(ents))

    # ftfy's extra upper-case entities, '&NAME;' without '&'.
    extra = {}
    for name, char in html.entities.html5.items():
        if name.endswith(";") and name == name.lower():
            up = name.upper()
            if html.unescape("&" + up) == "&" + up:
                extra[up] = char.upper()
    ex = sorted(extra.items(), key=lambda kv: kv[0].encode())
    w("static const tt_entity tt_ftfy_upper[] = {\n")
    for k, v in ex:
        w("    {%s, %s},\n" % (cstr(k), cstr(v)))
    w("};\n#define TT_N_FTFY_UPPER %d\n\n" % len(ex))

    # Codecs.
    w("/* Code points of bytes 0x80..0xFF; byte 0x1A is U+FFFD in sloppy codecs. */\n")
    w("typedef struct tt_codec { const char *name; int sloppy; uint16_t hi[128]; } tt_codec;\n")
    w("static const tt_codec tt_codecs[] = {\n")
    for name, codec, sloppy in ENCODINGS:
        t = TABLES[name]
        w("    {\"%s\", %d, {" % (name, int(sloppy)))
        w(", ".join("0x%04X" % ord(t[b]) for b in range(0x80, 0x100)))
        w("}},\n")
    w("};\n#define TT_N_CODECS %d\n\n" % len(ENCODINGS))

    # Categories.
    masks = {}
    for i, b in enumerate(BITS):
        chars = CAT[b] if b in CAT else "".join(CLUES[b])
        for c in chars:
            masks[ord(c)] = masks.get(ord(c), 0) | (1 << i)
    w("typedef struct tt_cat { uint32_t cp; uint32_t mask; } tt_cat;\n")
    w("static const tt_cat tt_cats[] = {\n")
    for cp in sorted(masks):
        w("    {0x%04X, 0x%05X},\n" % (cp, masks[cp]))
    w("};\n#define TT_N_CATS %d\n\n" % len(masks))

    # Width map.
    wm = {0x3000: " "}
    for i in range(0xFF01, 0xFFF0):
        alt = unicodedata.normalize("NFKC", chr(i))
        if alt != chr(i):
            wm[i] = alt
    for cp, s in wm.items():
        assert 1 <= len(s) <= 2, hex(cp)
    w("/* to[1] == 0 when the replacement is one code point. */\n")
    w("typedef struct tt_width { uint32_t from, to[2]; } tt_width;\n")
    w("static const tt_width tt_width_map[] = {\n")
    for cp in sorted(wm):
        t = [ord(c) for c in wm[cp]] + [0]
        w("    {0x%04X, {0x%04X, 0x%04X}},\n" % (cp, t[0], t[1]))
    w("};\n#define TT_N_WIDTH %d\n\n" % len(wm))
    w("#endif /* CDB_TOK_TABLES_H */\n")

main()
