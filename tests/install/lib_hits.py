"""lib_hits.py: test_lib.sh's readers of JSON (run with /usr/bin/python3).

  lib_hits.py hits SEARCH.json   the hits of `clipdb search --json` as the example
                                 search program prints them: rank, score, id, path
                                 (tab-separated; the score is the float32 the JSON's
                                 9 digits name, printed to 6 decimals as C's %.6f)
  lib_hits.py sizes MANIFEST     clipdb-world's manifest.jsonl: file name, the scene's WxH
"""
import json
import os
import struct
import sys


def main(what, path):
    if what == "hits":
        for h in json.load(open(path))["hits"]:
            score = struct.unpack("f", struct.pack("f", h["score"]))[0]
            print("%d\t%.6f\t%d\t%s" % (h["rank"], score, h["id"], h["path"]))
    else:
        for line in open(path):
            r = json.loads(line)
            s = r["scene"]
            print("%s\t%dx%d" % (os.path.basename(r["path"]), s["width"], s["height"]))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
