#!/usr/bin/python3
"""Checks that every file path and test name the docs and the source comments cite exists.

Usage: check_doc_pointers.py ROOT        (exit status 1 and one line per dead pointer)

What is read: every docs/*.md and README.md in full, and the comments (// and /* */ in C++;
# lines in Python, CMake and shell files) of every file under src/, include/, tests/, tools/,
bench/ and examples/. What counts as a citation:

- A path: a word with a source or doc extension (.h .cpp .inc .def .cmake .py .md .json .txt),
  e.g. `src/ops/conv.cpp`, `ops/conv.cpp`, `conv.cpp`, or a folder path ending in '/' whose
  first part is a folder of the repo (`src/passes/`). With a '/' it must be the end of a file's
  path in the repo at a folder boundary (`passes/verify.h` matches `src/passes/verify.h`), or
  name a file from the citing file's folder; a bare file name with a source extension (not .json
  or .txt, which are mostly outputs) must be some file's name. Not checked: names in an
  `#include <...>` anywhere in the tree (system and third-party headers), the other projects'
  files in OTHER_PROJECTS, paths under build/, and what .gitignore lists (run artefacts such as
  bench/results.json).
- A test name: `Suite.Name` in CamelCase, where Name has at least three capitalised words
  (gtest names here are sentences) or is a pattern with '*' (`Suite.*`, `Suite.*Lent*`). It must
  match a TEST/TEST_F/TEST_P/TYPED_TEST in tests/ (parameterised instantiations match by suite
  and name). In the docs only names inside `backticks` count; in comments any.

Only the standard library; run by CTest as doc_pointers (tests/CMakeLists.txt).
"""
import fnmatch
import os
import re
import sys

SOURCE_DIRS = ["src", "include", "tests", "tools", "bench", "examples"]
CPP_EXT = (".h", ".hpp", ".cpp", ".cc", ".inc", ".def")
HASH_COMMENT_FILES = (".py", ".cmake", ".sh")
PATH_EXT = ("h", "hpp", "cpp", "cc", "inc", "def", "cmake", "py", "md", "json", "txt")
# A path-like word: folders and a file name with one of the extensions, not glued to more word
# characters (so `libmvec.so.1` or `x.hpp_` are no citations).
PATH_RE = re.compile(r"(?<![\w./<-])((?:[A-Za-z0-9_.+-]+/)*[A-Za-z0-9_+-][A-Za-z0-9_.+-]*\.(?:"
                     + "|".join(PATH_EXT) + r"))(?![\w/-])")
FOLDER_RE = re.compile(r"(?<![\w./<-])((?:[A-Za-z0-9_-]+/)+)(?![\w.*<-])")
TEST_RE = re.compile(r"(?<![\w.:/])([A-Z][A-Za-z0-9]+)\.((?:DISABLED_)?[A-Za-z0-9_*]+)(?![\w(])")
BARE_EXT = (".h", ".hpp", ".cpp", ".cc", ".inc", ".def", ".cmake", ".py", ".md")
# Files of other projects that comments cite by name (for TF's, glibc's or GCC's behaviour);
# a path beginning with one of the prefixes is another project's too.
OTHER_PROJECTS = {"math.h", "sleef.h", "avx512fintrin.h", "polymorphic_function.py"}
OTHER_PREFIXES = ("tensorflow/", "torch/", "tinygrad/", "test/", "mlx/", "backend/")
TEST_NAME_WORDS = re.compile(r"[A-Z][a-z0-9]+")
TEST_DEF_RE = re.compile(r"\b(?:TEST|TEST_F|TEST_P|TYPED_TEST|TYPED_TEST_P)\s*\(\s*(\w+)\s*,\s*(\w+)\s*\)")


def repo_files(root):
    out = []
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        dirs[:] = [x for x in dirs if not x.startswith(".") and not (rel == "." and (
            x.startswith("build") or x == "out"))]
        for f in files:
            out.append(os.path.normpath(os.path.join(rel, f)))
    return sorted(out)


def gitignored(root):
    pats = []
    try:
        with open(os.path.join(root, ".gitignore")) as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#"):
                    pats.append(line.strip("/"))
    except OSError:
        pass
    return pats


def cpp_comments(text):
    """The comment text of C++ source, with string and character literals skipped; each
    comment is returned with its line number."""
    out, i, n, line = [], 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append((line, text[i + 2:j]))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j
            out.append((line, text[i + 2:j]))
            line += text.count("\n", i, j)
            i = j + 2
        elif text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i)
            end = n if end < 0 else end
            line += text.count("\n", i, end)
            i = end + len(m.group(1)) + 2
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # a digit separator: 1'000
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        else:
            i += 1
    return out


def hash_comments(text):
    out = []
    for k, raw in enumerate(text.splitlines(), 1):
        s = raw.lstrip()
        if s.startswith("#") and not s.startswith("#!"):
            out.append((k, s[1:]))
        elif "  # " in raw:
            out.append((k, raw.split("  # ", 1)[1]))
    return out


def python_docstrings(text):
    return [(text.count("\n", 0, m.start()) + 1, m.group(1))
            for m in re.finditer(r'"""(.*?)"""', text, re.S)]


def backticked(text):
    """The `code` spans of markdown text with their line numbers (fenced blocks included)."""
    out = []
    for m in re.finditer(r"```.*?```|`[^`\n]+`", text, re.S):
        out.append((text.count("\n", 0, m.start()) + 1, m.group(0).strip("`")))
    return out


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    files = repo_files(root)
    fileset = set(files)
    folders = {os.path.dirname(f) for f in files}
    folders |= {p for f in folders for p in [os.path.dirname(f)] if p}
    top = {f.split("/")[0] for f in files if "/" in f}
    basenames = {os.path.basename(f) for f in files}
    ignored = gitignored(root)

    external, tests = set(), set()
    for f in files:
        if f.endswith(CPP_EXT):
            with open(os.path.join(root, f), errors="replace") as fh:
                text = fh.read()
            external.update(re.findall(r"#\s*include\s*<([^>]+)>", text))
            if f.startswith("tests/"):
                tests.update(f"{s}.{n}" for s, n in TEST_DEF_RE.findall(text))
    suites = {t.split(".")[0] for t in tests}
    external_base = {os.path.basename(e) for e in external}

    def path_ok(p, citing):
        p = p.rstrip(".")
        if p.startswith(("build/", "/", "out/") + OTHER_PREFIXES) or p in OTHER_PROJECTS or any(
                fnmatch.fnmatch(p, g) for g in ignored):
            return True
        if p in external or p in fileset:
            return True
        if "/" not in p:
            return not p.endswith(BARE_EXT) or p in basenames or p in external_base
        here = os.path.normpath(os.path.join(os.path.dirname(citing), p))
        if here in fileset:
            return True
        return any(f.endswith("/" + p) for f in files)

    def folder_ok(p, citing):
        p = p.rstrip("/")
        if p.split("/")[0] not in top and not any(
                f.startswith("src/" + p.split("/")[0] + "/") for f in files):
            return True  # not a folder of this repo's shape: a URL piece, a unit, prose
        return (p in folders or os.path.normpath(os.path.join(os.path.dirname(citing), p)) in folders
                or any(d.endswith("/" + p) for d in folders))

    def test_ok(suite, name):
        if "*" in name:
            return suite in suites and any(fnmatch.fnmatchcase(t, f"{suite}.{name}") for t in tests)
        return f"{suite}.{name}" in tests

    def looks_like_test(suite, name):
        if "*" in name:
            return True
        return len(TEST_NAME_WORDS.findall(name.replace("DISABLED_", ""))) >= 3 and name[0].isupper() \
            and not name.isupper()

    dead = []

    def check(citing, line, text, tests_too):
        for m in PATH_RE.finditer(text):
            p = m.group(1)
            if p.startswith(("http", "www.")) or re.search(r"https?://\S*$", text[:m.start()]):
                continue
            if not path_ok(p, citing):
                dead.append(f"{citing}:{line}: file '{p}' does not exist")
        for m in FOLDER_RE.finditer(text):
            p = m.group(1)
            if re.search(r"https?://\S*$", text[:m.start()]):
                continue
            if p.count("/") >= 1 and p.split("/")[0] in top | {"src"} and not folder_ok(p, citing):
                dead.append(f"{citing}:{line}: folder '{p}' does not exist")
        if tests_too:
            for m in TEST_RE.finditer(text):
                suite, name = m.group(1), m.group(2)
                if looks_like_test(suite, name) and not test_ok(suite, name):
                    dead.append(f"{citing}:{line}: test '{suite}.{name}' does not exist")

    for f in files:
        path = os.path.join(root, f)
        if f.endswith(".md") and (f.startswith("docs/") or f == "README.md"):
            with open(path, errors="replace") as fh:
                text = fh.read()
            for k, raw in enumerate(text.splitlines(), 1):
                check(f, k, re.sub(r"`[^`]*`", " ", raw), False)  # prose: paths only
            for k, span in backticked(text):
                for j, part in enumerate(span.splitlines()):
                    check(f, k + j, part, True)
            continue
        if f.split("/")[0] not in SOURCE_DIRS:
            continue
        name = os.path.basename(f)
        if f.endswith(CPP_EXT):
            with open(path, errors="replace") as fh:
                comments = cpp_comments(fh.read())
        elif f.endswith(HASH_COMMENT_FILES) or name in ("CMakeLists.txt", "run"):
            with open(path, errors="replace") as fh:
                text = fh.read()
            comments = hash_comments(text)
            if f.endswith(".py") or name == "run":
                comments += python_docstrings(text)
        else:
            continue
        for line, c in comments:
            for j, part in enumerate(c.splitlines()):
                check(f, line + j, part, True)

    for d in sorted(set(dead)):
        print(d)
    if dead:
        print(f"{len(set(dead))} dead pointer(s): fix the path or name in the doc or comment, "
              "or the citation if the thing moved.", file=sys.stderr)
        return 1
    print(f"doc pointers: all cited files and tests exist ({len(tests)} tests known)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
