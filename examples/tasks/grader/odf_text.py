#!/usr/bin/env python3
"""A command grader (docs/tasks.md): judge the text of an OpenDocument file.

Usage: odf_text.py FILE WANT [UNWANTED]

FILE is a collected file (relative to $AGENTBOX_FILES). The check holds when
some paragraph of its content.xml, whitespace-normalised, equals WANT, and no
paragraph contains UNWANTED. Prints one JSON object: verified, incorrect
(the text is not right, or the file was not collected) or malformed (not an
OpenDocument file).
"""
import json
import os
import sys
import xml.etree.ElementTree as ET
import zipfile

TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"


def verdict(outcome, score, message):
    print(json.dumps({"outcome": outcome, "score": score, "message": message}))
    sys.exit(0)


def paragraphs(path):
    with zipfile.ZipFile(path) as z:
        info = z.getinfo("content.xml")
        if info.file_size > 16 << 20:
            raise ValueError("content.xml is over 16 MiB")
        root = ET.fromstring(z.read(info))
    for p in root.iter():
        if p.tag in (TEXT + "p", TEXT + "h"):
            yield " ".join("".join(p.itertext()).split())


def main():
    if len(sys.argv) not in (3, 4):
        print("usage: odf_text.py FILE WANT [UNWANTED]", file=sys.stderr)
        sys.exit(2)
    path = os.path.join(os.environ["AGENTBOX_FILES"], sys.argv[1])
    want = sys.argv[2]
    unwanted = sys.argv[3] if len(sys.argv) == 4 else None
    if not os.path.isfile(path):
        verdict("incorrect", 0, "%s was not collected" % sys.argv[1])
    try:
        paras = list(paragraphs(path))
    except (zipfile.BadZipFile, KeyError, ET.ParseError, ValueError) as e:
        verdict("malformed", 0, "%s is not an OpenDocument file: %s" % (sys.argv[1], e))
    if unwanted is not None:
        bad = [p for p in paras if unwanted in p]
        if bad:
            verdict("incorrect", 0, "%r is still there: %r" % (unwanted, bad[0]))
    if want not in paras:
        verdict("incorrect", 0, "no paragraph reads %r (seen %r)" % (want, paras[:6]))
    verdict("verified", 1, "a paragraph reads %r" % want)


main()
