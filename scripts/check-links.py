#!/usr/bin/env python3
"""Check that every relative link in README.md and docs/**/*.md resolves.

Principles:
- A link is relative when it names no scheme (`http:`, `mailto:`, ...). Its
  file part resolves against the linking file's directory and must exist
  (a file or a directory) inside the repository; its `#anchor`, if any,
  must be a heading of the target Markdown file (or of the linking file,
  for a bare `#anchor`), or an explicit `<a id=...>`/`<a name=...>`.
- Anchors follow GitHub's rules: the heading's rendered text, lowercased,
  every character that is not a letter, digit, mark, connector (`_`),
  space or `-` removed, spaces turned into `-`; a heading text seen
  before gets `-1`, `-2`, ... in order of appearance.
- Links inside fenced code blocks and inline code spans are not links,
  and headings inside fenced code blocks are not headings.
- Inline links `[text](target)`, images `![alt](target)` and reference
  definitions `[label]: target` are checked; absolute URLs are not
  fetched.

Usage: check-links.py [--root DIR]. Exit status 0 when every link
resolves, 1 otherwise, each broken link on stderr as FILE:LINE: TARGET:
WHY.
"""

import argparse
import os
import re
import sys
import unicodedata
from urllib.parse import unquote

# Pages being written in parallel with the docs index that links them.
# A missing one is a warning, not an error; once it exists it is checked
# like any other file. Delete an entry when its page has landed.
PENDING: set = set()

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^()\s]*(?:\([^()\s]*\)[^()\s]*)*)(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
HTML_ANCHOR = re.compile(r"<a\s[^>]*\b(?:id|name)\s*=\s*[\"']([^\"']+)[\"']", re.I)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def strip_code_spans(line):
    """The line with every inline code span blanked (same length)."""
    out, i = [], 0
    while i < len(line):
        if line[i] == "`":
            n = len(line) - len(line[i:].lstrip("`"))
            ticks = line[i:i + n]
            end = line.find(ticks, i + n)
            while end != -1 and end + n < len(line) and line[end + n] == "`":
                end = line.find(ticks, end + n + 1)
            if end == -1:
                out.append(line[i:i + n])
                i += n
                continue
            out.append(" " * (end + n - i))
            i = end + n
        else:
            out.append(line[i])
            i += 1
    return "".join(out)


def rendered_text(heading):
    """A heading's text as GitHub renders it, before the slug is made."""
    t = heading
    t = re.sub(r"!\[([^\]]*)\]\([^)]*\)", r"\1", t)
    t = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", t)
    t = re.sub(r"\[([^\]]*)\]\[[^\]]*\]", r"\1", t)
    t = re.sub(r"<[^>]+>", "", t)
    t = re.sub(r"(`+)(.+?)\1", r"\2", t)
    t = re.sub(r"(\*\*|__)(.+?)\1", r"\2", t)
    t = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"\1", t)
    t = re.sub(r"(?<!\w)_(?!\s)(.+?)(?<!\s)_(?!\w)", r"\1", t)
    return t.strip()


def slug(text):
    """GitHub's anchor for a heading's rendered text."""
    keep = []
    for ch in text.lower():
        cat = unicodedata.category(ch)
        if ch in " -" or cat[0] in "LMN" or cat == "Pc":
            keep.append(ch)
    return "".join(keep).replace(" ", "-")


def anchors(path, cache={}):
    """Every anchor a Markdown file defines."""
    if path in cache:
        return cache[path]
    seen, found = {}, set()
    fence = None
    prev = None
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for line in lines:
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            prev = None
            continue
        if m:
            fence = m.group(1)
            prev = None
            continue
        text = None
        a = ATX.match(line)
        if a:
            text = a.group(2) or ""
        elif prev and SETEXT.match(line) and not prev.startswith((" " * 4, "\t")):
            if not re.match(r"^\s*([-*+]|\d+[.)])\s", prev):
                text = prev.strip()
        for h in HTML_ANCHOR.findall(line):
            found.add(h)
        if text is not None:
            s = slug(rendered_text(text))
            n = seen.get(s, 0)
            seen[s] = n + 1
            found.add(s if n == 0 else f"{s}-{n}")
            prev = None
        else:
            prev = line if line.strip() else None
    cache[path] = found
    return found


def links(path):
    """(line number, target) of every link in a Markdown file."""
    fence = None
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for no, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        plain = strip_code_spans(line)
        for lm in INLINE_LINK.finditer(plain):
            yield no, lm.group(1)
        rm = REF_DEF.match(plain)
        if rm:
            yield no, rm.group(1)


def check_link(root, src, target):
    """None when `target`, linked from `src`, resolves; "absolute" for a URL;
    else why not."""
    target = target.strip()
    if target.startswith("<") and target.endswith(">"):
        target = target[1:-1]
    if not target or SCHEME.match(target) or target.startswith("//"):
        return "absolute"
    part, _, frag = target.partition("#")
    part = unquote(part)
    if part.startswith("/"):
        dest = os.path.normpath(os.path.join(root, part.lstrip("/")))
    elif part:
        dest = os.path.normpath(os.path.join(os.path.dirname(src), part))
    else:
        dest = src
    rel = os.path.relpath(dest, root)
    if rel.startswith(".."):
        return "points outside the repository"
    if not os.path.exists(dest):
        if rel.rstrip("/") in PENDING:
            return "pending"
        return "no such file"
    if not frag:
        return None
    if os.path.isdir(dest):
        return "an anchor on a directory"
    if not dest.endswith(".md"):
        return None  # GitHub's #L10 line anchors and the like
    if unquote(frag) not in anchors(dest):
        return f"no heading with anchor #{frag} in {rel}"
    return None


def markdown_files(root):
    files = []
    readme = os.path.join(root, "README.md")
    if os.path.isfile(readme):
        files.append(readme)
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, "docs")):
        dirnames.sort()
        files += [os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".md")]
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--root", default=default_root, help="the repository (default: this script's)")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    broken = checked = 0
    for path in markdown_files(root):
        for no, target in links(path):
            why = check_link(root, path, target)
            if why == "absolute":
                continue
            checked += 1
            where = f"{os.path.relpath(path, root)}:{no}: {target}"
            if why == "pending":
                print(f"{where}: warning: not written yet (pending in check-links.py)", file=sys.stderr)
            elif why:
                broken += 1
                print(f"{where}: {why}", file=sys.stderr)
    print(f"{checked} relative links checked, {broken} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
