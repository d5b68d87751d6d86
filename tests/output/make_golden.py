#!/usr/bin/python3
"""Writes tests/output/golden/: the expected bytes of output/output.h's encodings,
computed by Python's own json, base64 and UTF-8 codec (an implementation independent of
clipdb's). Run: /usr/bin/python3 tests/output/make_golden.py (deterministic: seed 27).

golden/encodings.txt, one case a line, fields separated by one space:
  s HEX JSON_HEX REPAIR_HEX B64 NEEDS_B64
      input bytes (NUL-free); the JSON string literal the writer must produce; the
      input with each byte that does not start a valid UTF-8 sequence replaced by
      U+FFFD; the base64 of the input ("-" when empty); 1 when the path rule adds
      "<key>_b64" (the input is not valid UTF-8)
  count N TEXT       N with thousands separators
  b64dec TEXT HEX    base64 text (standard or URL-safe, padding dropped or not) and
                     the bytes it decodes to
golden/doc_compact.json, golden/doc_pretty.json: the document tests/output builds
from the "s" cases (see test_output.c), as json.dumps writes it.
"""
import base64
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "golden")


def repair(b):
    """U+FFFD for each byte that does not start a valid UTF-8 sequence (Python's strict
    codec decides validity: no overlongs, surrogates or code points past U+10FFFF)."""
    out, i = [], 0
    while i < len(b):
        for k in (1, 2, 3, 4):
            try:
                ch = b[i:i + k].decode("utf-8")
            except UnicodeDecodeError:
                continue
            out.append(ch)
            i += k
            break
        else:
            out.append("\ufffd")
            i += 1
    return "".join(out)


def dumps(obj, **kw):
    """json.dumps as clipdb writes: raw UTF-8, and DEL escaped as \\u007f."""
    return json.dumps(obj, ensure_ascii=False, **kw).replace("\x7f", "\\u007f")


PIECES = [
    lambda r: bytes([r.randint(0x20, 0x7E)]),
    lambda r: bytes([r.randint(0x01, 0x1F)]),
    lambda r: b"\x7f",
    lambda r: r.choice([b'"', b"\\", b"/", b"\n", b"\t", b"\b", b"\f", b"\r"]),
    lambda r: chr(r.randint(0x80, 0x7FF)).encode(),
    lambda r: chr(r.choice([r.randint(0x800, 0xD7FF), r.randint(0xE000, 0xFFFF)])).encode(),
    lambda r: chr(r.randint(0x10000, 0x10FFFF)).encode(),
    lambda r: bytes([r.randint(0x80, 0xFF)]),
    lambda r: chr(r.randint(0x800, 0xD7FF)).encode()[:r.randint(1, 2)],  # cut short
    lambda r: r.choice([b"\xed\xa0\x80", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xf4\x90\x80\x80",
                        b"\xf8\x88\x80\x80\x80", b"\xc1\xbf", b"\xef\xbf\xbd"]),
]


def sample(r):
    n = r.randint(0, 24)
    return b"".join(r.choice(PIECES)(r) for _ in range(n))


def main():
    r = random.Random(27)
    strings = [b"", b"plain", "caf\u00e9 \u65e5\u672c \U0001F600".encode(),
               b"/photos/bad\xff\xfename.jpg", b"\x01\x1f\x7f"]
    strings += [sample(r) for _ in range(400)]
    lines = []
    for s in strings:
        assert b"\0" not in s
        text = repair(s)
        lit = dumps(text).encode()
        assert json.loads(lit.decode()) == text  # the literal parses back to the text
        b64 = base64.b64encode(s).decode() or "-"
        try:
            s.decode("utf-8")
            needs = 0
        except UnicodeDecodeError:
            needs = 1
        lines.append("s %s %s %s %s %d" % (s.hex() or "-", lit.hex(),
                                          text.encode().hex() or "-", b64, needs))
    counts = [0, 1, -1, 12, 999, 1000, -1000, 1234567, 10 ** 12, -(10 ** 15),
              2 ** 63 - 1, -(2 ** 63)]
    counts += [r.randint(-(2 ** 63), 2 ** 63 - 1) >> r.randint(0, 62) for _ in range(60)]
    lines += ["count %d %s" % (n, "{:,}".format(n)) for n in counts]
    for _ in range(120):
        b = bytes(r.randint(0, 255) for _ in range(r.randint(1, 40)))
        t = base64.urlsafe_b64encode(b) if r.random() < 0.5 else base64.b64encode(b)
        t = t.decode()
        if r.random() < 0.5:
            t = t.rstrip("=")
        lines.append("b64dec %s %s" % (t, b.hex()))
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "encodings.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    doc = {
        "strings": [repair(s) for s in strings],
        "paths": [],
        "counts": counts,
        "flags": [True, False, None],
        "empty_array": [],
        "empty_object": {},
    }
    for s in strings:
        p = {"path": repair(s)}
        if p["path"].encode() != s:
            p["path_b64"] = base64.b64encode(s).decode()
        doc["paths"].append(p)
    with open(os.path.join(OUT, "doc_compact.json"), "wb") as f:
        f.write((dumps(doc, separators=(",", ":")) + "\n").encode())
    with open(os.path.join(OUT, "doc_pretty.json"), "wb") as f:
        f.write((dumps(doc, indent=2) + "\n").encode())


if __name__ == "__main__":
    main()
