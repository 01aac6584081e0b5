"""Chunkers on small snippets of each language: line ranges, headers and caps."""

from __future__ import annotations

import re
import textwrap

import pytest
from pydantic import ValidationError

from ragmatrix.families.code_retrieval.chunking import (
    Chunk,
    Chunking,
    NoGrammarWarning,
    chunk_corpus,
    chunk_file,
    language_of,
    line_chunks,
    markdown_sections,
)
from ragmatrix.families.code_retrieval.corpus import Corpus, SourceFile, stdlib_root
from ragmatrix.foundations.context import start_run

SEMANTIC = Chunking(strategy="semantic")


@pytest.fixture(autouse=True)
def own_run(fresh_run):
    """Files with no grammar are reported once per run: each test is a run of its own."""


def spans(chunks: list[Chunk]) -> list[tuple[int, int, str]]:
    return [(c.start, c.end, c.context) for c in chunks]


def source(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def covers_every_line_with_code(chunks: list[Chunk], text: str) -> bool:
    """Every line with a word on it is in a chunk, except a lone `end` (Ruby's closing word)."""
    lines = text.split("\n")
    covered = {row for c in chunks for row in range(c.start, c.end + 1)}
    return all(
        row in covered for row, line in enumerate(lines, start=1) if re.search(r"\w", line) and line.strip() != "end"
    )


# --- line windows ------------------------------------------------------------------------------


def test_line_windows_overlap_and_the_last_one_ends_at_the_end_of_the_file():
    lines = [f"line {n}" for n in range(1, 10)]
    chunks = line_chunks("f.txt", lines, size=4, overlap=1, header=False)
    assert [(c.start, c.end) for c in chunks] == [(1, 4), (4, 7), (7, 9)]
    assert chunks[1].body == "line 4\nline 5\nline 6\nline 7"
    assert chunks[1].text == chunks[1].body  # line chunks carry no header


def test_line_windows_leave_out_blank_windows_and_empty_files():
    lines = ["a", "", "", "", "", "", "b"]
    assert [(c.start, c.end) for c in line_chunks("f", lines, 2, 0, header=False)] == [(1, 2), (7, 7)]
    assert chunk_file("empty.py", "", Chunking(strategy="line")) == []


def test_the_line_strategy_uses_its_settings_on_any_file():
    text = "\n".join(f"x{n} = {n}" for n in range(10)) + "\n"
    chunks = chunk_file("m.py", text, Chunking(strategy="line", lines=5, overlap=2))
    assert [(c.start, c.end) for c in chunks] == [(1, 5), (4, 8), (7, 10)]


def test_overlap_must_be_smaller_than_the_window():
    with pytest.raises(ValidationError, match="overlap must be smaller than lines"):
        Chunking(strategy="line", lines=4, overlap=4)


# --- semantic ----------------------------------------------------------------------------------

PYTHON = source(
    '''
    """Geometry."""
    import math


    class Point:
        """A point."""

        origin = None

        def __init__(self, x, y):
            self.x, self.y = x, y

        # the length
        @property
        def norm(self):
            return math.hypot(self.x, self.y)


    def add(a, b):
        return a + b
    '''
)


def test_python_gives_a_chunk_per_function_class_head_and_method_with_headers():
    chunks = chunk_file("geo/point.py", PYTHON, SEMANTIC)
    assert spans(chunks) == [
        (1, 2, ""),
        (5, 8, "class Point"),
        (10, 11, "class Point > def __init__"),
        (13, 16, "class Point > def norm"),  # the comment and the decorator go with the method
        (19, 20, "def add"),
    ]
    assert chunks[3].text == (
        "[file: geo/point.py]\n[context: class Point > def norm]\n"
        "    # the length\n    @property\n    def norm(self):\n        return math.hypot(self.x, self.y)"
    )
    assert chunks[0].text.startswith('[file: geo/point.py]\n"""Geometry')  # no context line at the top


def test_chunk_bodies_are_exactly_their_lines():
    lines = PYTHON.split("\n")
    for chunk in chunk_file("p.py", PYTHON, SEMANTIC):
        assert chunk.body == "\n".join(lines[chunk.start - 1 : chunk.end])


SNIPPETS = {
    "web/shapes.js": (
        """
        // Adds two numbers.
        function add(a, b) {
          return a + b;
        }

        export const mul = (a, b) => a * b;

        class Shape {
          constructor(n) {
            this.n = n;
          }

          area() {
            return 0;
          }
        }
        module.exports = { add };
        """,
        [
            (1, 4, "function add"),
            (6, 6, "function mul"),
            (8, 8, "class Shape"),
            (9, 11, "class Shape > method constructor"),
            (13, 15, "class Shape > method area"),
            (17, 17, ""),
        ],
    ),
    "web/box.ts": (
        """
        interface Point {
          x: number;
          y: number;
        }

        export class Box<T> {
          private v: T;

          get(): T {
            return this.v;
          }
        }

        function norm(p: Point): number {
          return Math.hypot(p.x, p.y);
        }
        """,
        [(1, 4, "interface Point"), (6, 7, "class Box"), (9, 11, "class Box > method get"), (14, 16, "function norm")],
    ),
    "geo/point.go": (
        """
        package geo

        import "math"

        // Point is a place on a plane.
        type Point struct {
            X, Y float64
        }

        // Norm is the distance from the origin.
        func (p *Point) Norm() float64 {
            return math.Hypot(p.X, p.Y)
        }

        func Add(a, b int) int {
            return a + b
        }
        """,
        [(1, 3, ""), (5, 8, "type Point"), (10, 13, "func (p *Point) Norm"), (15, 17, "func Add")],
    ),
    "src/point.rs": (
        """
        use std::fmt;

        /// A point on a plane.
        struct Point {
            x: f64,
            y: f64,
        }

        impl Point {
            fn norm(&self) -> f64 {
                (self.x * self.x + self.y * self.y).sqrt()
            }

            fn zero() -> Point {
                Point { x: 0.0, y: 0.0 }
            }
        }

        fn add(a: i32, b: i32) -> i32 {
            a + b
        }
        """,
        [
            (1, 1, ""),
            (3, 7, "struct Point"),
            (9, 9, "impl Point"),
            (10, 12, "impl Point > fn norm"),
            (14, 16, "impl Point > fn zero"),
            (19, 21, "fn add"),
        ],
    ),
    "geo/Point.java": (
        """
        package geo;

        /** A point on a plane. */
        public class Point {
            private double x;
            private double y;

            public Point(double x, double y) {
                this.x = x;
                this.y = y;
            }

            public double norm() {
                return Math.hypot(x, y);
            }
        }
        """,
        [
            (1, 1, ""),
            (3, 6, "class Point"),
            (8, 11, "class Point > constructor Point"),
            (13, 15, "class Point > method norm"),
        ],
    ),
    "geo/point.c": (
        """
        #include <math.h>

        struct point {
            double x;
            double y;
        };

        /* The distance from the origin. */
        double norm(const struct point *p) {
            return sqrt(p->x * p->x + p->y * p->y);
        }

        static int add(int a, int b) {
            return a + b;
        }
        """,
        [(1, 1, ""), (3, 6, "struct point"), (8, 11, "function norm"), (13, 15, "function add")],
    ),
    "geo/point.rb": (
        """
        require "json"

        # A point on a plane.
        class Point
          attr_reader :x, :y

          def initialize(x, y)
            @x = x
            @y = y
          end

          def norm
            Math.sqrt(x * x + y * y)
          end
        end

        module Geo
          def self.add(a, b)
            a + b
          end
        end
        """,
        [
            (1, 1, ""),
            (3, 5, "class Point"),
            (7, 10, "class Point > def initialize"),
            (12, 14, "class Point > def norm"),
            (17, 17, "module Geo"),
            (18, 20, "module Geo > def self.add"),  # the lone `end`s are no chunks
        ],
    ),
    "geo/Point.kt": (
        """
        package geo

        /** A point on a plane. */
        data class Point(val x: Double, val y: Double) {
            val size = 2

            fun norm(): Double {
                return Math.hypot(x, y)
            }

            companion object {
                fun zero() = Point(0.0, 0.0)
            }
        }

        fun add(a: Int, b: Int): Int {
            return a + b
        }
        """,
        [
            (1, 1, ""),
            (3, 5, "class Point"),  # the grammar puts the comment in the package header; it joins the class
            (7, 9, "class Point > fun norm"),
            (11, 11, "class Point > companion object"),
            (12, 12, "class Point > companion object > fun zero"),
            (16, 18, "fun add"),
        ],
    ),
    "geo/point.cpp": (
        """
        #include <cmath>

        namespace geo {

        // A point on a plane.
        class Point {
         public:
          double norm() const {
            return std::hypot(x_, y_);
          }

         private:
          double x_;
          double y_;
        };

        template <typename T>
        T add(T a, T b) {
          return a + b;
        }

        }  // namespace geo

        double area(const geo::Point& p) { return 0; }
        """,
        [
            (1, 1, ""),
            (3, 7, "namespace geo > class Point"),
            (8, 10, "namespace geo > class Point > function norm"),
            (12, 15, "namespace geo > class Point"),
            (17, 20, "namespace geo > function add"),
            (22, 22, "namespace geo"),
            (24, 24, "function area"),
        ],
    ),
    "geo/Point.php": (
        """
        <?php

        namespace Geo;

        /** A point on a plane. */
        class Point
        {
            private float $x;

            public function __construct(float $x)
            {
                $this->x = $x;
            }

            public function norm(): float
            {
                return abs($this->x);
            }
        }

        function add(int $a, int $b): int
        {
            return $a + $b;
        }
        """,
        [
            (1, 3, ""),
            (5, 8, "class Point"),
            (10, 13, "class Point > function __construct"),
            (15, 18, "class Point > function norm"),
            (21, 24, "function add"),
        ],
    ),
    "Geo/Point.swift": (
        """
        import Foundation

        /// A point on a plane.
        struct Point {
            var x: Double
            var y: Double

            func norm() -> Double {
                return (x * x + y * y).squareRoot()
            }
        }

        protocol Shape {
            func area() -> Double
        }

        func add(_ a: Int, _ b: Int) -> Int {
            return a + b
        }
        """,
        [
            (1, 1, ""),
            (3, 6, "struct Point"),
            (8, 10, "struct Point > func norm"),
            (13, 13, "protocol Shape"),
            (14, 14, "protocol Shape > func area"),
            (17, 19, "func add"),
        ],
    ),
    "geo/Point.scala": (
        """
        package geo

        /** A point on a plane. */
        case class Point(x: Double, y: Double) {
          val size = 2

          def norm: Double = math.hypot(x, y)

          def scale(k: Double): Point = {
            Point(x * k, y * k)
          }
        }

        object Point {
          def zero: Point = Point(0, 0)
        }

        def add(a: Int, b: Int): Int = a + b
        """,
        [
            (1, 1, ""),
            (3, 5, "class Point"),
            (7, 7, "class Point > def norm"),
            (9, 11, "class Point > def scale"),
            (14, 14, "object Point"),
            (15, 15, "object Point > def zero"),
            (18, 18, "def add"),
        ],
    ),
}


@pytest.mark.parametrize("path", list(SNIPPETS))
def test_each_language_is_cut_along_its_definitions(path):
    text, expected = SNIPPETS[path]
    text = source(text)
    chunks = chunk_file(path, text, SEMANTIC)
    assert spans(chunks) == expected
    assert all(c.text.startswith(f"[file: {path}]\n") for c in chunks)
    assert covers_every_line_with_code(chunks, text)


def test_markdown_is_cut_at_headings_with_the_heading_trail_and_ignores_fenced_code():
    text = source(
        """
        Intro text.

        # Geometry

        Points and lines.

        ## Install

        ```
        # not a heading
        pip install geo
        ```

        ### From source

        Clone it.

        ## Use

        Call norm.
        """
    )
    chunks = chunk_file("docs/README.md", text, SEMANTIC)
    assert spans(chunks) == [
        (1, 1, ""),
        (3, 5, "Geometry"),
        (7, 12, "Geometry > Install"),
        (14, 16, "Geometry > Install > From source"),
        (18, 20, "Geometry > Use"),
    ]
    assert chunks[3].text.startswith("[file: docs/README.md]\n[context: Geometry > Install > From source]\n### From")
    assert len(markdown_sections(text.split("\n"))) == 5


def test_other_files_fall_back_to_line_windows_with_the_file_header():
    text = "\n".join(f"setting_{n} = {n}" for n in range(1, 8))
    with pytest.warns(NoGrammarWarning, match=r"no grammar parses \.ini files \(conf/app\.ini is the first\)"):
        chunks = chunk_file("conf/app.ini", text, Chunking(strategy="semantic", lines=3, overlap=1))
    assert [(c.start, c.end) for c in chunks] == [(1, 3), (3, 5), (5, 7)]
    assert chunks[0].text == "[file: conf/app.ini]\nsetting_1 = 1\nsetting_2 = 2\nsetting_3 = 3"


def test_a_file_with_no_grammar_is_reported_once_per_run_and_extension(tmp_path):
    corpus = Corpus(
        "path conf",
        stdlib_root(),
        tuple(
            SourceFile(path, "key = 1\nother = 2\n")
            for path in ("a.ini", "b.ini", "c.cfg", "Makefile", "d.py", "e.rb", "f.toml", "g.ini")
        ),
        "fingerprint",
    )
    with pytest.warns(NoGrammarWarning) as caught:
        chunk_corpus(corpus, SEMANTIC)
        chunk_corpus(corpus, Chunking(strategy="bounded"))  # the same run: said already
    said = [str(w.message) for w in caught if issubclass(w.category, NoGrammarWarning)]
    assert said == [
        "code retrieval: no grammar parses .ini files (a.ini is the first): they are cut by lines, not along "
        "their syntax",
        "code retrieval: no grammar parses .cfg files (c.cfg is the first): they are cut by lines, not along "
        "their syntax",
        "code retrieval: no grammar parses (no extension) files (Makefile is the first): they are cut by lines, "
        "not along their syntax",
    ]
    with pytest.warns(NoGrammarWarning), start_run(tmp_path):  # a new run says it again
        chunk_corpus(corpus, SEMANTIC)


def test_the_line_strategy_reports_nothing(recwarn):
    chunk_file("conf/app.ini", "a = 1\n", Chunking(strategy="line"))
    assert not [w for w in recwarn if issubclass(w.category, NoGrammarWarning)]


C_HEADER = source(
    """
    #ifndef GEO_H
    #define GEO_H

    #ifdef __cplusplus
    extern "C" {
    #endif

    /* A point. */
    struct point {
        double x;
    };

    double norm(const struct point *p);

    static inline int add(int a, int b) {
        return a + b;
    }

    #ifdef __cplusplus
    }
    #endif

    #endif
    """
)
CPP_HEADER = source(
    """
    #include <vector>

    namespace geo {
    class Shape {
     public:
      virtual double area() const = 0;
    };
    }
    """
)


def test_a_dot_h_file_is_cpp_when_its_text_says_so_else_c():
    assert language_of("geo/point.h", C_HEADER) == "c"
    assert language_of("geo/shape.h", CPP_HEADER) == "cpp"
    assert language_of("geo/shape.h") == "c"  # without its text
    assert language_of("geo/shape.hpp") == language_of("geo/shape.cc") == "cpp"
    # the include guard and `extern "C"` are walked through: the definitions inside are chunks
    assert spans(chunk_file("geo/point.h", C_HEADER, SEMANTIC)) == [
        (1, 6, ""),
        (8, 11, "struct point"),
        (13, 13, ""),
        (15, 17, "function add"),
        (19, 23, ""),
    ]
    contexts = [c.context for c in chunk_file("geo/shape.h", CPP_HEADER, SEMANTIC)]
    assert "namespace geo > class Shape" in contexts


def test_toml_tables_are_definitions_and_data_files_are_cut_along_their_syntax(recwarn):
    toml = source(
        """
        # The crate.
        [package]
        name = "geo"
        version = "1.0"

        [dependencies.serde]
        version = "1"

        [[bin]]
        name = "geo"
        """
    )
    assert spans(chunk_file("Cargo.toml", toml, SEMANTIC)) == [
        (1, 4, "[package]"),
        (6, 7, "[dependencies.serde]"),
        (9, 10, "[[bin]]"),
    ]
    data = '{"name": "geo",\n "scripts": {\n' + ",\n".join(f'  "s{n}": "run {n}"' for n in range(30)) + "\n }\n}\n"
    workflow = "on: push\njobs:\n  test:\n    steps:\n" + "".join(f"      - run: step {n}\n" for n in range(30))
    for path, text in (("package.json", data), (".github/ci.yml", workflow)):
        for strategy in ("semantic", "bounded"):
            chunks = chunk_file(path, text, Chunking(strategy=strategy, max_chars=60))
            assert len(chunks) > 3 and all(code_size(c) <= 60 for c in chunks)
            assert covers_every_line_with_code(chunks, text)
    assert not [w for w in recwarn if issubclass(w.category, NoGrammarWarning)]


# --- bounded -----------------------------------------------------------------------------------


def code_size(chunk: Chunk) -> int:
    return sum(1 for c in chunk.body if not c.isspace())


LONG_PYTHON = (
    source(
        """
    def small_one(a):
        return a + 1


    def small_two(b):
        return b * 2


    class Table:
        def render(self, rows):
            out = []
            for row in rows:
                cells = [str(cell).rjust(12) for cell in row]
                out.append(" | ".join(cells))
            header = "-" * 40
            out.insert(0, header)
            out.append(header)
            return "\\n".join(out)

        def width(self):
            return 40
    """
    )
    + "BANNER = '"
    + "x" * 150
    + "'\n"
)


def test_bounded_chunks_never_exceed_the_cap_and_keep_every_line():
    cap = 60
    chunks = chunk_file("table.py", LONG_PYTHON, Chunking(strategy="bounded", max_chars=cap))
    assert all(code_size(c) <= cap for c in chunks)
    assert covers_every_line_with_code(chunks, LONG_PYTHON)
    assert all(1 <= c.start <= c.end for c in chunks)


def test_bounded_merges_small_siblings_and_splits_large_ones_inside_their_definition():
    chunks = chunk_file("table.py", LONG_PYTHON, Chunking(strategy="bounded", max_chars=60))
    assert (chunks[0].start, chunks[0].end, chunks[0].context) == (1, 6, "def small_one, def small_two")
    inside_render = [c for c in chunks if c.context.startswith("class Table > def render")]
    assert len(inside_render) >= 2  # too large for one chunk: split along its statements
    assert inside_render[0].body == "class Table:\n    def render(self, rows):"  # the head joins its first part


def test_a_line_longer_than_the_cap_is_cut_into_pieces_of_that_line():
    chunks = chunk_file("table.py", LONG_PYTHON, Chunking(strategy="bounded", max_chars=60))
    last_line = LONG_PYTHON.count("\n")
    pieces = [c for c in chunks if c.start == c.end == last_line]
    assert len(pieces) == 3 and all(code_size(p) <= 60 for p in pieces)
    assert "".join(p.body for p in pieces) == LONG_PYTHON.split("\n")[last_line - 1]


def test_a_definition_that_fits_stays_whole_under_the_bounded_strategy():
    chunks = chunk_file("p.py", PYTHON, Chunking(strategy="bounded", max_chars=1000))
    assert [(c.start, c.end) for c in chunks] == [(1, 20)]
    assert chunks[0].text.startswith("[file: p.py]\n[context: class Point, def add]\n")


@pytest.mark.parametrize("path", list(SNIPPETS))
def test_bounded_caps_every_language(path):
    text = source(SNIPPETS[path][0])
    chunks = chunk_file(path, text, Chunking(strategy="bounded", max_chars=30))
    assert all(code_size(c) <= 30 for c in chunks)
    assert covers_every_line_with_code(chunks, text)


def test_bounded_caps_markdown_sections_and_unparsed_files():
    text = "# Title\n\n" + "\n".join(f"word{n} " * 5 for n in range(20)) + "\n## Next\n\nshort\n"
    chunks = chunk_file("notes.md", text, Chunking(strategy="bounded", max_chars=80))
    assert all(code_size(c) <= 80 for c in chunks)
    assert {c.context for c in chunks} == {"Title", "Title > Next"}
    with pytest.warns(NoGrammarWarning):
        plain = chunk_file("notes.txt", text, Chunking(strategy="bounded", max_chars=80))
    assert all(code_size(c) <= 80 for c in plain) and covers_every_line_with_code(plain, text)


@pytest.mark.parametrize("strategy", ["semantic", "bounded"])
def test_real_library_files_are_covered_and_capped(strategy):
    text = (stdlib_root() / "textwrap.py").read_text(encoding="utf-8")
    chunks = chunk_file("textwrap.py", text, Chunking(strategy=strategy, max_chars=400))
    assert covers_every_line_with_code(chunks, text)
    if strategy == "bounded":
        assert all(code_size(c) <= 400 for c in chunks)
    assert any(c.context == "class TextWrapper > def wrap" for c in chunks)


# --- capped semantic chunks --------------------------------------------------------------------


def test_a_semantic_definition_over_the_cap_is_split_along_its_syntax_in_its_context():
    cap = 60
    chunks = chunk_file("table.py", LONG_PYTHON, Chunking(strategy="semantic", max_chars=cap))
    assert covers_every_line_with_code(chunks, LONG_PYTHON)
    assert all(code_size(c) <= cap for c in chunks)
    render = [c for c in chunks if c.context.startswith("class Table > def render")]
    assert len(render) >= 2  # one definition, too large for one chunk
    assert all(c.text.startswith("[file: table.py]\n[context: class Table > def render") for c in render)
    # definitions that fit stay whole, one each, as without a cap
    assert [(c.start, c.end, c.context) for c in chunks[:2]] == [(1, 2, "def small_one"), (5, 6, "def small_two")]
    assert [(c.start, c.end, c.context) for c in chunks if c.context.endswith("def width")] == [
        (20, 21, "class Table > def width")
    ]


def test_the_semantic_cap_defaults_to_about_what_minilm_reads_and_max_chars_overrides_it():
    from ragmatrix.families.code_retrieval.chunking import BOUNDED_CAP, SEMANTIC_CAP

    assert Chunking(strategy="semantic").cap == SEMANTIC_CAP == 600
    assert Chunking(strategy="bounded").cap == BOUNDED_CAP == 400
    assert Chunking(strategy="semantic", max_chars=10_000).cap == 10_000
    text = (stdlib_root() / "json" / "decoder.py").read_text(encoding="utf-8")
    uncapped = chunk_file("decoder.py", text, Chunking(strategy="semantic", max_chars=100_000))
    capped = chunk_file("decoder.py", text, SEMANTIC)
    assert max(code_size(c) for c in uncapped) > SEMANTIC_CAP  # py_scanstring, JSONObject ...
    assert all(code_size(c) <= SEMANTIC_CAP for c in capped)
    assert covers_every_line_with_code(capped, text)
    assert {c.context.split(" > ")[0] for c in capped} >= {"def py_scanstring", "def JSONObject"}


def test_a_semantic_markdown_section_over_the_cap_is_packed_with_its_heading_trail():
    text = "# Title\n\n" + "\n".join(f"word{n} " * 5 for n in range(20)) + "\n## Next\n\nshort\n"
    chunks = chunk_file("notes.md", text, Chunking(strategy="semantic", max_chars=80))
    assert all(code_size(c) <= 80 for c in chunks) and covers_every_line_with_code(chunks, text)
    assert {c.context for c in chunks} == {"Title", "Title > Next"}
