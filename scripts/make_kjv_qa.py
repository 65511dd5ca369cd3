#!/usr/bin/env python3
"""A small real question/answer dataset for fine-tuning demos: "Which book of the Bible says: "<the first
words of a verse>"?" -> "<the book>", as JSONL ({"prompt", "completion"} lines) with disjoint train and
validation verses.

The verses are the KJV text scripts/setup.sh extracted (.deps/data/kjv.txt: one verse per line, no
reference); their references come from the same `bible` program (Debian package bible-kjv) that setup ran to
make that file, line for line, and every line's text is checked against kjv.txt.

Usage: python3 scripts/make_kjv_qa.py [--out DIR] [--train N] [--val N] [--words W] [--books A,B,...] [--seed S]
                                     [--kjv FILE]
--books keeps the verses of those books only (names as in the answers, e.g. Genesis,Psalms,Matthew): a task a
small model can learn in minutes; all 66 books is a hard one.
Writes DIR/train.jsonl and DIR/val.jsonl (default DIR: runs/kjv_qa).
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys

# The `bible` program's book abbreviations, in canonical order, and the names the answers use.
BOOKS = [
    ("Ge", "Genesis"), ("Exo", "Exodus"), ("Lev", "Leviticus"), ("Num", "Numbers"), ("Deu", "Deuteronomy"),
    ("Josh", "Joshua"), ("Jdgs", "Judges"), ("Ruth", "Ruth"), ("1Sm", "1 Samuel"), ("2Sm", "2 Samuel"),
    ("1Ki", "1 Kings"), ("2Ki", "2 Kings"), ("1Chr", "1 Chronicles"), ("2Chr", "2 Chronicles"), ("Ezra", "Ezra"),
    ("Neh", "Nehemiah"), ("Est", "Esther"), ("Job", "Job"), ("Psa", "Psalms"), ("Prv", "Proverbs"),
    ("Eccl", "Ecclesiastes"), ("SSol", "Song of Solomon"), ("Isa", "Isaiah"), ("Jer", "Jeremiah"),
    ("Lam", "Lamentations"), ("Eze", "Ezekiel"), ("Dan", "Daniel"), ("Hos", "Hosea"), ("Joel", "Joel"),
    ("Amos", "Amos"), ("Obad", "Obadiah"), ("Jonah", "Jonah"), ("Mic", "Micah"), ("Nahum", "Nahum"),
    ("Hab", "Habakkuk"), ("Zep", "Zephaniah"), ("Hag", "Haggai"), ("Zec", "Zechariah"), ("Mal", "Malachi"),
    ("Mat", "Matthew"), ("Mark", "Mark"), ("Luke", "Luke"), ("John", "John"), ("Acts", "Acts"), ("Rom", "Romans"),
    ("1Cor", "1 Corinthians"), ("2Cor", "2 Corinthians"), ("Gal", "Galatians"), ("Eph", "Ephesians"),
    ("Phi", "Philippians"), ("Col", "Colossians"), ("1Th", "1 Thessalonians"), ("2Th", "2 Thessalonians"),
    ("1Tim", "1 Timothy"), ("2Tim", "2 Timothy"), ("Titus", "Titus"), ("Phmn", "Philemon"), ("Heb", "Hebrews"),
    ("Jas", "James"), ("1Pet", "1 Peter"), ("2Pet", "2 Peter"), ("1Jn", "1 John"), ("2Jn", "2 John"),
    ("3Jn", "3 John"), ("Jude", "Jude"), ("Rev", "Revelation"),
]


def fail(msg):
    sys.stderr.write(f"make_kjv_qa: {msg}\n")
    sys.exit(1)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    deps = os.environ.get("EDGETRAIN_DEPS", os.path.join(here, "..", ".deps"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kjv", default=os.path.join(deps, "data", "kjv.txt"))
    ap.add_argument("--out", default="runs/kjv_qa")
    ap.add_argument("--train", type=int, default=4000, help="training samples")
    ap.add_argument("--val", type=int, default=200, help="validation samples")
    ap.add_argument("--words", type=int, default=8, help="words of the verse quoted in the question")
    ap.add_argument("--books", default="", help="comma-separated book names to keep (default: all)")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.train < 1 or a.val < 1 or a.words < 1:
        fail("--train, --val and --words must be >= 1")
    try:
        with open(a.kjv, encoding="ascii") as f:
            verses = f.read().split("\n")
    except OSError as e:
        fail(f"cannot read the KJV text '{a.kjv}' (made by scripts/setup.sh): {e}")
    if verses and verses[-1] == "":
        verses.pop()
    try:
        refs = subprocess.run(["bible", "-f", "-p", "/usr/lib", "Gen1:1-Rev22:21"], stdin=subprocess.DEVNULL,
                              capture_output=True, check=True, env=dict(os.environ, LC_ALL="C"),
                              cwd="/tmp").stdout.decode("ascii").split("\n")
    except (OSError, subprocess.CalledProcessError) as e:
        fail(f"the `bible` program (Debian package bible-kjv) failed: {e}")
    refs = [r for r in refs if r.strip()]
    if len(refs) != len(verses):
        fail(f"`bible` printed {len(refs)} verses but '{a.kjv}' has {len(verses)}")
    names = dict(BOOKS)
    keep = set(b.strip() for b in a.books.split(",") if b.strip())
    unknown = keep - set(names.values())
    if unknown:
        fail(f"--books: unknown book(s) {', '.join(sorted(unknown))}; names are as in: {', '.join(names.values())}")
    items = []
    for i, (r, v) in enumerate(zip(refs, verses)):
        m = re.match(r"^(\w+?)(\d+):(\d+) (.*)$", r)
        if not m or m.group(1) not in names:
            fail(f"line {i + 1}: unexpected reference in '{r[:40]}'")
        text = re.sub(" +", " ", m.group(4)).rstrip()
        if text != v:
            fail(f"line {i + 1}: `bible` says '{text[:40]}...' but kjv.txt has '{v[:40]}...'")
        words = v.split(" ")
        if len(words) <= a.words or (keep and names[m.group(1)] not in keep):  # the quote is never the whole verse
            continue
        items.append((" ".join(words[: a.words]), names[m.group(1)]))
    if a.train + a.val > len(items):
        fail(f"--train + --val = {a.train + a.val} exceeds the {len(items)} usable verses")
    random.Random(a.seed).shuffle(items)
    os.makedirs(a.out, exist_ok=True)
    for name, part in (("train", items[: a.train]), ("val", items[a.train : a.train + a.val])):
        path = os.path.join(a.out, f"{name}.jsonl")
        with open(path, "w", encoding="ascii") as f:
            for quote, book in part:
                f.write(json.dumps({"prompt": f'Which book of the Bible says: "{quote}"?', "completion": book}) + "\n")
        print(f"{path}: {len(part)} samples")


if __name__ == "__main__":
    main()
