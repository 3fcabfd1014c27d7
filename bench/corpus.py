"""A deterministic generator of session logs in the canonical format, for the benchmarks.

    python -m bench.corpus --size-mb 25 [--profile mixed|noise|cjk|chat] [--out bench/out]

Everything here is seeded: the same parameters give byte-identical logs and the
same query mix, so a corpus can be regenerated anywhere instead of committed.

Text is realistic rather than random letters. Chinese words are drawn with the
frequencies of jieba's bundled dictionary (dict.txt, about 350,000 words);
English words with the frequencies of bench/english_words.txt (4,000 words
counted in the Python standard library's comments and docstrings). Sentences,
code, command output, file listings and JSON tool envelopes are built from
them, so posting lists, document frequencies and message sizes look like an
agent's history, not like uniform noise.

Two users of the text generator (TextGen):
- bench/storage_choice.py built in-memory messages (its own loop, so its
  published corpus, docs/storage.md, is reproduced byte for byte; the script
  has left the tree, commit e394d56 holds it);
- generate() below writes whole canonical logs (contract section 2.1): one
  session per file, `session` and `title` lines, settled `message` lines,
  streamed `message_delta` lines that a later `message` settles, and noise
  lines (progress, usage, file-history snapshots...) that the indexer must
  skip. Knobs (Params) set the size, the CJK share, the noise share, the share
  of searchable bytes in tool results, sessions, cwds and streaming.

Beside the logs, generate() writes manifest.json: the parameters, per file its
session, cwd and size, totals, and a fixed query mix drawn from the corpus
(English words and phrases, CJK terms of 1, 2 and 4 characters, mixed-script
terms, zero-hit terms, natural-language questions) for bench/run.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import importlib.resources
import itertools
import json
import math
import os
import random
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "out"
# A corpus on disk is reused only when it was made by this generator: its key
# hashes the parameters with the bytes of this file and of the word list, so an
# edit to either regenerates rather than reuses a stale corpus.
GENERATOR_VERSION = 1

# Han, kana and Hangul: the characters of a CJK run (as session_recall.text.fold,
# restated here so that the generator does not depend on the product).
CJK_CLASS = (
    "\u1100-\u11ff\u3005\u3006\u3007\u302e\u302f\u3040-\u309f\u30a0-\u30ff\u3130-\u318f\u31f0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\ud7b0-\ud7ff\uf900-\ufaff"
    "\U0001aff0-\U0001b16f\U00020000-\U0003ffff"
)
CJK_RUN = re.compile(f"[{CJK_CLASS}]+")
_CJK_FULL = re.compile(f"[{CJK_CLASS}]+")

# ---------------------------------------------------------------------------
# Vocabularies
# ---------------------------------------------------------------------------

# The small list bench/storage_choice.py (docs/storage.md) was published with: common English and
# programming words, roughly most frequent first, sampled with Zipf weights.
# Kept as it was so that its corpus (docs/storage.md) can be reproduced.
SMALL_ENGLISH = """
the to of and a in is it you that for this on with be can as are not we if
will use file have do at or but from so what an your by run test code should
error need let just one all when i me my there was function would like how
then now make check add fix which new data here more this only get set also
into out value type return call first same change they case other line some
may see no time tests work could update list because build path name using
its been config output input before after server client request response log
index query search result results string number true false null default
option options module import class method object field key table database
sqlite token tokens parse parser message messages session sessions user
assistant tool write read open close start stop version install package
commit branch merge diff patch review comment issue bug feature release
script command shell terminal process thread memory cache disk network port
host url api json yaml text bytes offset length size count limit page
second seconds minute ms fast slow slower faster performance benchmark measure
memory cpu core loop async await event handler callback queue worker job
task step plan idea problem solution reason example note warning info debug
trace stack frame variable constant parameter argument flag env environment
local remote origin main master upstream docker image container volume mount
directory folder window screen button click view model schema migration
row column insert delete select where order group join filter sort match
python rust go javascript typescript node npm pip cargo crate library
framework service endpoint route handler middleware auth token secret key
password hash salt encrypt decrypt sign verify certificate timeout retry
""".split()


def small_english_weights() -> list[float]:
    """Cumulative Zipf weights of SMALL_ENGLISH (rank r weighs 1/(r+2))."""
    return list(itertools.accumulate(1.0 / (r + 2) for r in range(len(SMALL_ENGLISH))))


@functools.cache  # read once per process: a test makes several corpora
def load_english() -> tuple[list[str], list[int]]:
    """Words and cumulative counts of the shipped English frequency list."""
    words: list[str] = []
    counts: list[int] = []
    for line in (HERE / "english_words.txt").read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        word, count = line.split()
        words.append(word)
        counts.append(int(count))
    return words, list(itertools.accumulate(counts))


@functools.cache
def load_jieba_dict() -> tuple[list[str], list[int]]:
    """Words and cumulative frequencies of jieba's bundled dict.txt (CJK-only words)."""
    try:
        text = importlib.resources.files("jieba").joinpath("dict.txt").read_text(encoding="utf-8")
    except ModuleNotFoundError:
        sys.exit("the benchmarks need jieba (a project dependency): pip install -e .")
    words: list[str] = []
    freqs: list[int] = []
    for line in text.splitlines():
        parts = line.split(" ")
        if len(parts) < 2:
            continue
        word, freq = parts[0], int(parts[1])
        if freq > 0 and _CJK_FULL.fullmatch(word):
            words.append(word)
            freqs.append(freq)
    return words, list(itertools.accumulate(freqs))


class Pool:
    """Weighted samples drawn in chunks (random.choices per word is slow)."""

    def __init__(self, rng: random.Random, population: list[str], cum_weights: list[float]):
        self.rng, self.population, self.cum = rng, population, cum_weights
        self.buf: list[str] = []
        self.pos = 0

    def take(self, n: int) -> list[str]:
        if self.pos + n > len(self.buf):
            self.buf = self.buf[self.pos :] + self.rng.choices(
                self.population, cum_weights=self.cum, k=max(n, 1 << 16)
            )
            self.pos = 0
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def one(self) -> str:
        return self.take(1)[0]


# ---------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------

CJK_PUNCT_MID = "，、；："
CJK_PUNCT_END = "。。。！？"


class TextGen:
    """Sentences, identifiers and code from two weighted word pools sharing one rng.

    The first six methods are bench/storage_choice.py's original generator,
    moved here unchanged (the same rng calls in the same order), so that its
    corpus is reproduced byte for byte."""

    def __init__(self, rng: random.Random, zh: Pool, en: Pool):
        self.rng, self.zh, self.en = rng, zh, en

    def identifier(self) -> str:
        rng, en = self.rng, self.en
        parts = en.take(rng.randint(2, 3))
        style = rng.random()
        if style < 0.4:
            return "_".join(parts)
        if style < 0.7:
            return "".join(p.capitalize() for p in parts)
        if style < 0.9:
            return "/".join(parts) + rng.choice((".py", ".rs", ".md", ".json", ""))
        return f"{parts[0]}-{rng.randint(0, 9999)}"

    def english_token(self) -> str:
        return self.identifier() if self.rng.random() < 0.25 else self.en.one()

    def cjk_sentence(self) -> str:
        rng = self.rng
        out: list[str] = []
        for w in self.zh.take(rng.randint(4, 24)):
            r = rng.random()
            if r < 0.05:  # an English word glued to the Chinese: 这个function
                out.append(self.english_token())
            elif r < 0.10:  # ... or set off by spaces
                out.append(f" {self.english_token()} ")
            elif r < 0.12:
                out.append(str(rng.randint(0, 500)))
            out.append(w)
            if rng.random() < 0.12:
                out.append(rng.choice(CJK_PUNCT_MID))
        out.append(rng.choice(CJK_PUNCT_END))
        return "".join(out)

    def english_sentence(self) -> str:
        rng = self.rng
        toks = [self.english_token() if rng.random() < 0.15 else w for w in self.en.take(rng.randint(4, 22))]
        if rng.random() < 0.08:  # a Chinese word inside English prose
            toks.insert(rng.randrange(len(toks)), self.zh.one())
        toks[0] = toks[0].capitalize()
        return " ".join(toks) + rng.choice("...?:")

    def code_block(self) -> str:
        rng, en = self.rng, self.en
        lines = []
        for _ in range(rng.randint(2, 12)):
            name, arg, other = self.identifier(), en.one(), en.one()
            lines.append(f"    {name}({arg}, {other}={rng.randint(0, 99)})  # {en.one()} {en.one()}")
        return "```\n" + "\n".join(lines) + "\n```"

    def body(self, size: int, chinese: bool, code_rate: float) -> str:
        """Prose of about `size` UTF-8 bytes, mostly in one language, with a
        fenced code block now and then (storage_choice's message body)."""
        rng = self.rng
        parts: list[str] = []
        n = 0
        while n < size:
            r = rng.random()
            if r < code_rate:
                seg = "\n" + self.code_block() + "\n"
            elif chinese:
                seg = self.cjk_sentence() if r < 0.88 else " " + self.english_sentence() + " "
            else:
                seg = self.english_sentence() + " " if r < 0.94 else self.cjk_sentence()
            if rng.random() < 0.1:
                seg += "\n\n"
            parts.append(seg)
            n += len(seg.encode("utf-8"))
        return "".join(parts).strip()

    # --- tool output (used by generate() only) ---------------------------------

    def comment(self, chinese: bool) -> str:
        if chinese:
            return "".join(self.zh.take(self.rng.randint(2, 8)))
        return " ".join(self.en.take(self.rng.randint(3, 10)))

    def code_line(self, chinese: bool) -> str:
        """One line of plausible source code."""
        rng, en = self.rng, self.en
        r = rng.random()
        ind = "    " * rng.randint(0, 3)
        if r < 0.15:
            return f"{ind}# {self.comment(chinese)}"
        if r < 0.30:
            return f"{ind}def {self.identifier().replace('/', '_').replace('-', '_')}({en.one()}, {en.one()}=None):"
        if r < 0.45:
            return f"{ind}return {en.one()}.{en.one()}({en.one()}, {rng.randint(0, 999)})"
        if r < 0.60:
            return f"{ind}if {en.one()} is not None and {en.one()} > {rng.randint(0, 64)}:"
        if r < 0.70:
            msg = self.comment(chinese)
            return f'{ind}raise ValueError(f"{msg}: {{{en.one()}!r}}")'
        if r < 0.78:
            return f"from {en.one()}.{en.one()} import {self.identifier().replace('/', '_').replace('-', '_')}"
        return f"{ind}{en.one()}_{en.one()} = {en.one()}[{rng.randint(0, 9)}:{rng.randint(10, 99)}]"

    def lines_until(self, size: int, make) -> str:
        out: list[str] = []
        n = 0
        while n < size:
            line = make()
            out.append(line)
            n += len(line.encode("utf-8")) + 1
        return "\n".join(out)

    def path(self) -> str:
        rng, en = self.rng, self.en
        depth = rng.randint(1, 3)
        return "/".join(en.take(depth)) + "/" + self.identifier().replace("/", "_") + rng.choice(
            (".py", ".py", ".rs", ".ts", ".md", ".json", ".toml"))


# ---------------------------------------------------------------------------
# Parameters and profiles
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Params:
    size_mb: float  # raw log size to reach, 1 MB = 10^6 bytes
    seed: int = 1
    cjk_share: float = 0.3  # share of searchable text bytes that are CJK characters
    noise_share: float = 0.96  # share of lines that are noise (8,187 text events among 187,706 lines in one real corpus)
    tool_share: float = 0.86  # share of searchable bytes in tool results (86 % in one real workspace)
    sessions: int = 0  # 0: sessions_per_mb per MB of log, at least 2
    sessions_per_mb: float = 2.0
    # "agent": a turn is a prompt, tool steps and an answer; "chat": a prompt
    # and an answer, short (median message about 400 bytes), a tool step rarely
    style: str = "agent"
    cwds: int = 12  # distinct project folders the sessions belong to
    delta_share: float = 0.1  # share of assistant messages streamed as message_delta lines before settling
    noise_bytes: int = 300  # median size of a noise line's payload (progress output, snapshots)
    secret_rate: float = 0.002  # share of tool results carrying a credential (exercises redaction)
    max_message_bytes: int = 1_000_000  # cap of one message's text

    def n_sessions(self) -> int:
        return self.sessions or max(2, round(self.size_mb * self.sessions_per_mb))

    def key(self) -> str:
        """A short stable name for these parameters (the corpus folder's suffix)."""
        blob = orjson.dumps({"v": GENERATOR_VERSION, **dataclasses.asdict(self)}, option=orjson.OPT_SORT_KEYS)
        h = hashlib.blake2b(blob, digest_size=4)
        for name in ("corpus.py", "english_words.txt"):
            h.update((HERE / name).read_bytes())
        return h.hexdigest()


# The three corpora the targets of issue 5 are stated on.
PROFILES: dict[str, dict] = {
    # noise-heavy, as the published corpus: 96 % of lines noise, 86 % of the
    # text in tool results, mostly English; noise lines carry streamed command
    # output and snapshots, so about nine bytes in ten are noise (the target
    # in raw MB/s)
    "noise": {"cjk_share": 0.1, "noise_bytes": 800},
    # message-rich, mixed scripts: half the lines noise, a quarter of the
    # text bytes CJK (the target in messages/s)
    "mixed": {"cjk_share": 0.25, "noise_share": 0.5},
    # CJK-heavy text: half the lines noise, as much Chinese as the generator
    # makes (about half of the text bytes; the target in MB/s of text)
    "cjk": {"cjk_share": 0.5, "noise_share": 0.5},
    # chat-sized messages, as in the published chat corpora the messages/s
    # target is stated on: a prompt of about 200 bytes and an answer of about
    # 650 (median of all messages about 400), a tool step in one turn of
    # ten, a fifth of the lines noise, shorter sessions (ten per MB)
    "chat": {"cjk_share": 0.25, "noise_share": 0.2, "tool_share": 0.05, "style": "chat", "sessions_per_mb": 10.0},
}


def params_for(profile: str, size_mb: float, **overrides) -> Params:
    values = {**PROFILES[profile], **{k: v for k, v in overrides.items() if v is not None}}
    return Params(size_mb=size_mb, **values)


# ---------------------------------------------------------------------------
# The log writer
# ---------------------------------------------------------------------------

EPOCH = 1_767_225_600  # 2026-01-01T00:00:00Z: timestamps are fixed, never "now"
TOOLS = ("Bash", "Read", "Grep", "Edit", "Write", "WebSearch")
TOOL_WEIGHTS = list(itertools.accumulate((30, 30, 15, 15, 5, 5)))
COMMANDS = ("pytest -q", "git status", "git diff --stat", "ls -la", "cargo test", "npm test", "python -m",
            "rg -n", "make", "docker ps", "curl -s", "tail -n 50", "sqlite3")
ZERO_CJK = "\u3402\u3404\u3406"  # extension A characters outside jieba's dictionary: in no generated text


def _ts(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _hexid(rng: random.Random, n: int = 32) -> str:
    return f"{rng.getrandbits(4 * n):0{n}x}"


def _lognorm(rng: random.Random, median: float, sigma: float, lo: int, hi: int) -> int:
    return int(min(max(rng.lognormvariate(math.log(median), sigma), lo), hi))


class _Stats:
    def __init__(self) -> None:
        self.lines = self.noise_lines = self.delta_lines = 0
        self.messages = self.streamed = self.unsettled = 0
        self.text_bytes = self.cjk_bytes = self.tool_result_bytes = 0
        self.by_role: dict[str, int] = {}
        self.sizes: list[int] = []  # bytes of each message's searchable text

    def text(self, role: str, text: str) -> None:
        b = len(text.encode("utf-8"))
        self.text_bytes += b
        self.sizes.append(b)
        self.cjk_bytes += sum(len(run.encode("utf-8")) for run in CJK_RUN.findall(text))
        if role == "tool_result":
            self.tool_result_bytes += b
        self.by_role[role] = self.by_role.get(role, 0) + 1
        self.messages += 1


class _Session:
    """Writes one session's log, keeping the corpus-wide shares on target."""

    def __init__(self, gen: Generator, sid: str, cwd: str, start: float):
        self.g, self.sid, self.cwd, self.t = gen, sid, cwd, start
        self.out: list[bytes] = []
        self.bytes = 0
        self.msg_n = 0
        self.turn_n = 0
        self.last_output = ""

    # every line goes through here, so the noise share is kept per line
    def _emit(self, obj: dict, *, noise: bool = False) -> None:
        line = orjson.dumps(obj) + b"\n"
        self.out.append(line)
        self.bytes += len(line)
        st = self.g.stats
        st.lines += 1
        if noise:
            st.noise_lines += 1
        else:
            self._noise_after()

    def _tick(self, lo: float = 1.0, hi: float = 30.0) -> str:
        self.t += self.g.rng.uniform(lo, hi)
        return _ts(self.t)

    def _noise_after(self) -> None:
        """Noise lines until their share of all lines is back on target (with jitter)."""
        p, st, rng = self.g.p, self.g.stats, self.g.rng
        if p.noise_share <= 0:
            return
        ratio = p.noise_share / (1 - p.noise_share)
        deficit = (st.lines - st.noise_lines) * ratio - st.noise_lines
        for _ in range(int(max(0.0, deficit) * rng.uniform(0.5, 1.5) + rng.random())):
            self._emit(self.g.noise_line(self), noise=True)

    def message(self, role: str, text: str, turn: str, *, tool_name: str | None = None,
                attachments: list | None = None, searchable: str | None = None, stream: bool = False,
                settle: bool = True) -> None:
        """One message; `searchable` is what the indexer will keep of `text`
        (the decoded leaves of a JSON envelope), for the statistics and the
        query mix."""
        self.msg_n += 1
        mid = f"m{self.msg_n}"
        g = self.g
        g.stats.text(role, searchable if searchable is not None else text)
        g.sample(role, searchable if searchable is not None else text)
        if stream:
            g.stats.streamed += 1
            rng = g.rng
            pos, n = 0, len(text)
            while pos < n:
                step = rng.randint(20, 400)
                g.stats.delta_lines += 1
                self._emit({"type": "message_delta", "session_id": self.sid, "message_id": mid, "turn_id": turn,
                            "role": role, "ts": self._tick(0.05, 0.5), "text": text[pos : pos + step]})
                pos += step
            if not settle:
                g.stats.unsettled += 1
                return
        obj = {"type": "message", "session_id": self.sid, "message_id": mid, "turn_id": turn, "role": role,
               "ts": self._tick(), "text": text}
        if tool_name:
            obj["tool_name"] = tool_name
        if attachments:
            obj["attachments"] = attachments
        self._emit(obj)

    def write_turn(self, last: bool, budget: float) -> None:
        if self.g.p.style == "chat":
            self.chat_turn(last)
            return
        g, rng, tg, p = self.g, self.g.rng, self.g.tg, self.g.p
        self.turn_n += 1
        turn = f"t{self.turn_n}"
        # the user asks
        atts = None
        if rng.random() < 0.01:
            atts = [{"id": f"img_{_hexid(rng, 12)}", "name": f"screenshot-{rng.randint(1, 99)}.png",
                     "mime_type": "image/png", "bytes": rng.randint(20_000, 900_000)}]
        self.message("user", tg.body(_lognorm(rng, 150, 1.0, 8, 20_000), g.chinese(), 0.0), turn, attachments=atts)
        # tool steps, with a short assistant remark now and then
        for _ in range(min(int(rng.expovariate(1 / 3.0)), 25)):
            if self.bytes >= budget:  # the session's share of the corpus is written: cut the turn short
                break
            if rng.random() < 0.3:
                self.message("assistant", tg.body(_lognorm(rng, 200, 0.8, 10, 8_000), g.chinese(), 0.0), turn,
                             stream=rng.random() < p.delta_share)
            self.tool_step(turn)
        self.answer(turn, last, 450, 1.0, 0.08)

    def chat_turn(self, last: bool) -> None:
        """A chat exchange: a prompt, now and then a tool step, an answer."""
        g, rng, tg = self.g, self.g.rng, self.g.tg
        self.turn_n += 1
        turn = f"t{self.turn_n}"
        self.message("user", tg.body(_lognorm(rng, 200, 0.9, 8, 20_000), g.chinese(), 0.0), turn)
        if rng.random() < 0.1:
            self.tool_step(turn)
        self.answer(turn, last, 650, 0.8, 0.05)

    def answer(self, turn: str, last: bool, median: float, sigma: float, code_share: float) -> None:
        """A turn's answer (log-normal size, streamed sometimes; the last
        session's last stream left unsettled now and then), and the
        session's title after its first turn, half the time."""
        g, rng, tg, p = self.g, self.g.rng, self.g.tg, self.g.p
        stream = rng.random() < p.delta_share
        text = tg.body(_lognorm(rng, median, sigma, 10, 40_000), g.chinese(), code_share)
        self.message("assistant", text, turn, stream=stream, settle=not (last and stream and rng.random() < 0.5))
        if self.turn_n == 1 and rng.random() < 0.5:
            title = " ".join(tg.en.take(rng.randint(2, 5))) if not g.chinese() else "".join(tg.zh.take(3))
            self._emit({"type": "title", "session_id": self.sid, "title": title})

    def tool_step(self, turn: str) -> None:
        g, rng, tg = self.g, self.g.rng, self.g.tg
        tool = rng.choices(TOOLS, cum_weights=TOOL_WEIGHTS)[0]
        zh = g.chinese()
        if tool == "Bash":
            args = {"command": f"{rng.choice(COMMANDS)} {tg.path()}", "description": tg.comment(zh)}
        elif tool in ("Read", "Write"):
            args = {"file_path": f"{self.cwd}/{tg.path()}"}
            if tool == "Write":
                args["content"] = tg.lines_until(_lognorm(rng, 600, 1.0, 40, 20_000), lambda: tg.code_line(zh))
        elif tool == "Grep":
            args = {"pattern": tg.identifier(), "path": self.cwd, "output_mode": "content"}
        elif tool == "Edit":
            args = {"file_path": f"{self.cwd}/{tg.path()}", "old_string": tg.code_line(zh),
                    "new_string": tg.lines_until(_lognorm(rng, 200, 0.8, 20, 4_000), lambda: tg.code_line(zh))}
        else:
            args = {"query": tg.comment(zh)}
        call_text = orjson.dumps(args).decode()
        self.message("tool_call", call_text, turn, tool_name=tool,
                     searchable=tool + "\n" + "\n".join(str(v) for v in args.values()))
        # the result: sized so that tool results hold their share of the text
        size = min(_lognorm(rng, 700, 1.3, 10, g.p.max_message_bytes) * g.tool_factor, g.p.max_message_bytes)
        out = g.tool_output(tool, int(size), zh, self.cwd)
        if rng.random() < g.p.secret_rate:
            out += f"\nOPENAI_API_KEY=sk-proj-{_hexid(rng, 40)}\n"
        self.last_output = out
        if tool == "Bash" and rng.random() < 0.3:  # Claude Code's JSON envelope: the projection decodes it
            text = orjson.dumps({"stdout": out, "stderr": "", "interrupted": False, "isImage": False}).decode()
            self.message("tool_result", text, turn, searchable=out)
        else:
            self.message("tool_result", out, turn)
        g.steer_tool_share()


class Generator:
    def __init__(self, p: Params):
        self.p = p
        self.rng = random.Random(p.seed)
        words, cum = load_jieba_dict()
        en_words, en_cum = load_english()
        self.tg = TextGen(self.rng, Pool(self.rng, words, cum), Pool(self.rng, en_words, en_cum))
        self.stats = _Stats()
        self.tool_factor = 1.0
        self.zh_p = min(1.0, p.cjk_share * 1.6)  # the first guess; chinese() corrects it
        # the query mix is drawn from a reservoir of messages, with its own rng
        # so that choosing queries never shifts the corpus
        self.qrng = random.Random(p.seed * 7919 + 1)
        self.samples: list[tuple[str, str]] = []
        self.seen = 0

    # --- steering the shares ---------------------------------------------------

    def chinese(self) -> bool:
        """Whether the next piece of text is mainly Chinese. The probability
        integrates the error between the CJK share so far and the target (a
        "Chinese" piece is only 45-75 % CJK bytes, with identifiers, numbers
        and code in it, and an English one a few per cent), so the corpus
        converges on the target whatever the mix of pieces; a target above
        what all-Chinese pieces give (about 0.5) saturates there."""
        st, target = self.stats, self.p.cjk_share
        if st.text_bytes:
            self.zh_p = min(1.0, max(0.0, self.zh_p + 0.01 * (target - st.cjk_bytes / st.text_bytes)))
        return self.rng.random() < self.zh_p

    def steer_tool_share(self) -> None:
        st = self.stats
        if st.text_bytes < 50_000:
            return
        share = st.tool_result_bytes / st.text_bytes
        self.tool_factor = min(50.0, max(0.02, self.tool_factor * (1.03 if share < self.p.tool_share else 1 / 1.03)))

    def sample(self, role: str, text: str) -> None:
        """Reservoir of 3,000 messages (at most 4 KB of each) for the query mix."""
        self.seen += 1
        item = (role, text[:4096])
        if len(self.samples) < 3000:
            self.samples.append(item)
        else:
            j = self.qrng.randrange(self.seen)
            if j < 3000:
                self.samples[j] = item

    # --- tool output and noise --------------------------------------------------

    def tool_output(self, tool: str, size: int, zh: bool, cwd: str) -> str:
        tg, rng = self.tg, self.rng
        # A Chinese-language project reads and greps Chinese documents more
        # than code: that is where a CJK-heavy corpus gets its CJK bytes.
        doc_rate = 0.8 if zh else 0.3
        if tool == "Read":
            if rng.random() < doc_rate:  # a document
                return tg.body(size, zh, 0.05)
            n = itertools.count(1)
            return tg.lines_until(size, lambda: f"{next(n):6d}\t{tg.code_line(zh)}")
        if tool == "Grep":
            line = (lambda: tg.cjk_sentence()) if zh and rng.random() < doc_rate else (lambda: tg.code_line(zh))
            return tg.lines_until(size, lambda: f"{tg.path()}:{rng.randint(1, 2000)}:{line()}")
        if tool == "Bash":
            r = rng.random()
            if zh and r < 0.5:
                return tg.body(size, zh, 0.1)
            if r < 0.4:  # test or build output
                return tg.lines_until(size, lambda: (
                    f"tests/test_{tg.en.one()}.py::test_{tg.en.one()}_{tg.en.one()} "
                    + rng.choice(("PASSED", "PASSED", "PASSED", "FAILED", "SKIPPED"))
                    if rng.random() < 0.7 else
                    f"E   AssertionError: {tg.comment(zh)}"))
            if r < 0.7:  # a log
                return tg.lines_until(size, lambda: (
                    f"{_ts(EPOCH + rng.randint(0, 10**7))} {rng.choice(('INFO', 'INFO', 'WARN', 'ERROR', 'DEBUG'))} "
                    f"{tg.en.one()}: {tg.comment(zh)} {tg.en.one()}={rng.randint(0, 99999)}"))
            return tg.body(size, zh, 0.1)
        if tool in ("Edit", "Write"):
            return f"The file {cwd}/{tg.path()} has been updated. " + tg.body(min(size, 400), zh, 0.0)
        return tg.body(size, zh, 0.0)  # WebSearch: prose

    def noise_line(self, s: _Session) -> dict:
        """One line the indexer must skip: progress, usage, snapshots, hooks.
        About 1 % embed a message object (a sub-agent's progress), so the
        parser cannot reject every noise line from its bytes alone."""
        rng, p = self.rng, self.p
        r = rng.random()
        ts = _ts(s.t)
        if r < 0.45:
            size = _lognorm(rng, p.noise_bytes, 0.9, 20, 200_000)
            src = s.last_output or "running"
            start = rng.randrange(max(1, len(src) - size)) if len(src) > size else 0
            chunk = src[start : start + size]
            while len(chunk) < size and len(src) < size:  # short outputs repeat, as a tail -f would
                chunk += "\n" + src
            return {"type": "progress", "session_id": s.sid, "ts": ts, "tool_use_id": f"toolu_{_hexid(rng, 24)}",
                    "data": {"type": "bash_progress", "output": chunk[:size], "elapsed_s": round(rng.uniform(0, 90), 1)}}
        if r < 0.70:
            return {"type": "progress", "session_id": s.sid, "ts": ts, "uuid": _hexid(rng),
                    "data": {"type": "hook_progress", "hookEvent": rng.choice(("PreToolUse", "PostToolUse", "Stop")),
                             "hookName": f"PostToolUse:{rng.choice(TOOLS)}", "command": "node hooks/check.js"}}
        if r < 0.88:
            return {"type": "usage", "session_id": s.sid, "ts": ts, "model": "model-large",
                    "input_tokens": rng.randint(1, 9000), "output_tokens": rng.randint(1, 4000),
                    "cache_read_input_tokens": rng.randint(0, 200_000), "cache_creation_input_tokens": rng.randint(0, 9000)}
        if r < 0.99:
            files = {f"{s.cwd}/{self.tg.path()}": {"backupFileName": f"{_hexid(rng, 16)}@v{rng.randint(1, 9)}",
                                                   "version": rng.randint(1, 9), "backupTime": ts}
                     for _ in range(_lognorm(rng, max(1, p.noise_bytes // 150), 0.8, 1, 400))}
            return {"type": "file-history-snapshot", "messageId": _hexid(rng), "isSnapshotUpdate": rng.random() < 0.5,
                    "snapshot": {"messageId": _hexid(rng), "trackedFileBackups": files, "timestamp": ts}}
        return {"type": "progress", "session_id": s.sid, "ts": ts,
                "data": {"type": "agent_progress", "agentId": _hexid(rng, 8),
                         "message": {"type": "message", "role": "assistant",
                                     "text": self.tg.body(_lognorm(rng, 200, 0.8, 10, 4000), self.chinese(), 0.0)}}}


def _cwds(rng: random.Random, tg: TextGen, n: int) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        name = "-".join(tg.en.take(rng.randint(1, 2)))
        path = f"/home/dev/{rng.choice(('work', 'src', 'projects'))}/{name}"
        if path not in out:
            out.append(path)
    return out


@dataclass
class Corpus:
    """A corpus on disk, as its manifest describes it."""

    root: Path
    manifest: dict

    @property
    def files(self) -> list[dict]:
        return self.manifest["files"]

    @property
    def queries(self) -> list[dict]:
        return self.manifest["queries"]

    @property
    def raw_bytes(self) -> int:
        return self.manifest["totals"]["raw_bytes"]


def generate(p: Params, root: Path) -> Corpus:
    """Write the logs of `p` under `root` (emptied first) and its manifest."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    t0 = time.perf_counter()
    g = Generator(p)
    rng, tg = g.rng, g.tg
    n_sessions = p.n_sessions()
    cwds = _cwds(rng, tg, max(1, p.cwds))
    cwd_weights = list(itertools.accumulate(1.0 / (r + 1) for r in range(len(cwds))))  # some projects are busier
    weights = [rng.lognormvariate(0, 0.8) for _ in range(n_sessions)]
    target = p.size_mb * 1e6
    files: list[dict] = []
    written = 0
    for i in range(n_sessions):
        # each session gets its share of what is still to write, so the total lands on target
        remaining_w = sum(weights[i:])
        budget = (target - written) * weights[i] / remaining_w if remaining_w else 0
        sid = f"{_hexid(rng, 8)}-{_hexid(rng, 4)}-{_hexid(rng, 4)}-{_hexid(rng, 4)}-{_hexid(rng, 12)}"
        cwd = rng.choices(cwds, cum_weights=cwd_weights)[0]
        start = EPOCH + 120 * 86400 * (i + rng.random()) / n_sessions  # later sessions are newer
        s = _Session(g, sid, cwd, start)
        s._emit({"type": "session", "session_id": sid, "cwd": cwd, "started_at": _ts(start)})
        while True:
            last = s.bytes >= budget * 0.9
            s.write_turn(last, budget)
            if last or s.bytes >= budget:
                break
        folder = root / cwd.strip("/").replace("/", "-")
        folder.mkdir(exist_ok=True)
        rel = f"{folder.name}/{sid}.jsonl"
        data = b"".join(s.out)
        (root / rel).write_bytes(data)
        written += len(data)
        files.append({"path": rel, "session_id": sid, "cwd": cwd, "bytes": len(data)})
    st = g.stats
    manifest = {
        "generator_version": GENERATOR_VERSION,
        "params": dataclasses.asdict(p),
        "key": p.key(),
        "files": files,
        "totals": {
            "raw_bytes": written,
            "files": len(files),
            "cwds": len({f["cwd"] for f in files}),
            "lines": st.lines,
            "noise_lines": st.noise_lines,
            "noise_line_share": round(st.noise_lines / st.lines, 4),
            "delta_lines": st.delta_lines,
            "messages": st.messages,
            "messages_by_role": dict(sorted(st.by_role.items())),
            "median_message_bytes": sorted(st.sizes)[len(st.sizes) // 2] if st.sizes else 0,
            "streamed_messages": st.streamed,
            "unsettled_messages": st.unsettled,
            "searchable_text_bytes": st.text_bytes,
            "cjk_share": round(st.cjk_bytes / st.text_bytes, 4),
            "tool_result_share": round(st.tool_result_bytes / st.text_bytes, 4),
        },
        "queries": query_mix(g),
        "seconds": round(time.perf_counter() - t0, 2),
    }
    (root / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=1), encoding="utf-8")
    return Corpus(root, manifest)


def corpus_dir(p: Params, profile: str, out: Path = DEFAULT_OUT) -> Path:
    return out / f"corpus-{profile}-{p.size_mb:g}mb-s{p.seed}-{p.key()}"


def ensure(p: Params, root: Path) -> tuple[Corpus, bool]:
    """The corpus of `p` at `root`: reused when its manifest has the same
    parameters and every file has its recorded size, else generated.
    Returns (corpus, reused)."""
    mf = root / "manifest.json"
    if mf.exists():
        manifest = json.loads(mf.read_text(encoding="utf-8"))
        if manifest.get("key") == p.key() and manifest.get("params") == dataclasses.asdict(p) and all(
            (root / f["path"]).is_file() and (root / f["path"]).stat().st_size == f["bytes"] for f in manifest["files"]
        ):
            return Corpus(root, manifest), True
    elif root.exists() and any(root.iterdir()):
        raise SystemExit(f"{root} is not empty and holds no corpus manifest: refusing to overwrite it")
    return generate(p, root), False


# ---------------------------------------------------------------------------
# The query mix
# ---------------------------------------------------------------------------

_EN_WORD = re.compile(r"(?<![A-Za-z0-9_])[a-z]{3,}(?![A-Za-z0-9_])")
_EN_PAIR = re.compile(r"(?<![A-Za-z0-9_])([a-z]{3,}) ([a-z]{3,})(?![A-Za-z0-9_])")
_GLUED = re.compile(f"(?<![A-Za-z0-9_])([a-z]{{3,}})([{CJK_CLASS}]{{2,}})")


def _segment(run: str, vocab: set[str]) -> list[str]:
    """Dictionary words of a CJK run, greedy longest match first (4 to 2 characters)."""
    out, i = [], 0
    while i < len(run):
        for n in (4, 3, 2):
            if run[i : i + n] in vocab and len(run[i : i + n]) == n:
                out.append(run[i : i + n])
                i += n
                break
        else:
            i += 1
    return out


def query_mix(g: Generator) -> list[dict]:
    """A fixed mix of queries drawn from the corpus (the reservoir of
    messages), each {category, query, question}. Categories: English words
    (from common to rare), English phrases, CJK terms of 1, 2 and 4
    characters, mixed-script terms, zero-hit terms and natural-language
    questions. Every term but the zero-hit ones occurs in the corpus."""
    rng = g.qrng
    texts = [t for _, t in g.samples]
    lowered = [t.lower() for t in texts]
    blob = "\n".join(lowered)
    en_words = g.tg.en.population
    content = set(en_words[100:3000])  # words a person would search for: not the most common hundred
    zh_vocab = set(g.tg.zh.population)
    out: list[dict] = []

    def add(category: str, query: str = "", question: str | None = None) -> None:
        out.append({"category": category, "query": query, "question": question})

    def shuffled(items: list) -> list:
        return rng.sample(items, len(items))

    # English words at falling frequency: rank bands of the vocabulary, each
    # word checked to occur (as a word) in the sampled messages
    for lo, hi in ((20, 100), (100, 400), (400, 1500), (1500, 4000)):
        for w in shuffled([w for w in en_words[lo:hi] if len(w) >= 4]):
            if re.search(rf"(?<![a-z0-9_]){w}(?![a-z0-9_])", blob):
                add("en_word", w)
                break

    # English phrases: two adjacent words of a sampled message, quoted
    got = 0
    for t in shuffled(lowered):
        pairs = [(a, b) for a, b in _EN_PAIR.findall(t) if a in content or b in content]
        if pairs:
            a, b = rng.choice(pairs)
            add("en_phrase", f'"{a} {b}"')
            got += 1
            if got == 3:
                break

    # CJK terms: 1 character from the text; 2 and 4 characters from jieba's
    # dictionary, weighted by frequency, that occur in the sampled messages
    runs = [r for t in texts for r in CJK_RUN.findall(t)]
    if runs:
        for _ in range(3):
            add("cjk1", rng.choice(rng.choice(runs)))
    zh = g.tg.zh
    for n in (2, 4):
        got, tries = 0, 0
        chosen: set[str] = set()
        while got < 3 and tries < 200_000:
            tries += 1
            w = rng.choices(zh.population, cum_weights=zh.cum)[0]
            if len(w) == n and w not in chosen and w in blob:
                chosen.add(w)
                add(f"cjk{n}", w)
                got += 1
        long_runs = [r for r in runs if len(r) >= n]
        for run in rng.sample(long_runs, min(3 - got, len(long_runs))):  # a rare length: substrings of real runs
            i = rng.randrange(len(run) - n + 1)
            add(f"cjk{n}", run[i : i + n])

    # mixed scripts: a term glued across scripts (an identifier run into a
    # Chinese word: error处理), and a CJK word with an English word from the
    # same message (two terms, ANDed)
    glued = []
    for t in lowered:
        for m in _GLUED.finditer(t):
            words = _segment(m.group(2), zh_vocab)
            if words and m.group(2).startswith(words[0]):
                glued.append(m.group(1) + words[0])
    if glued:
        add("mixed", rng.choice(glued))
    got = 0
    for t in shuffled(lowered):
        cjk = [w for r in CJK_RUN.findall(t) for w in _segment(r, zh_vocab) if len(w) == 2]
        words = [w for w in _EN_WORD.findall(t) if w in content]
        if cjk and words:
            add("mixed", f"{rng.choice(cjk)} {rng.choice(words)}")
            got += 1
            if got == 2:
                break

    # zero hits: an English non-word, a CJK term in no generated text (the
    # index finds nothing, so recall's exact fallback scan runs), and a word
    # ANDed with the non-word (nothing has both: recall's partial matches)
    add("zero_hit", "qzxjvkwy")
    add("zero_hit", ZERO_CJK[:2])
    add("zero_hit", f"{out[0]['query'] if out else 'error'} qzxjvkwy")

    # natural-language questions (question=, no query), words from one message
    for t in shuffled(lowered):
        words = sorted({w for w in _EN_WORD.findall(t) if w in content and len(w) >= 5})
        if len(words) >= 2:
            a, b = rng.sample(words, 2)
            add("question", question=f"how did we fix the {a} {b} problem last week?")
            break
    for t in shuffled(texts):
        cjk = sorted({w for r in CJK_RUN.findall(t) for w in _segment(r, zh_vocab) if len(w) >= 2})
        if len(cjk) >= 2:
            a, b = rng.sample(cjk, 2)
            add("question", question=f"上次{a}的{b}是怎么处理的？")
            break
    for t in shuffled(lowered):
        cjk = sorted({w for r in CJK_RUN.findall(t) for w in _segment(r, zh_vocab) if len(w) >= 2})
        words = sorted({w for w in _EN_WORD.findall(t) if w in content})
        if cjk and words:
            add("question", question=f"为什么{rng.choice(words)}的{rng.choice(cjk)}会失败？")
            break
    return out


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------


def describe(c: Corpus) -> str:
    t = c.manifest["totals"]
    return (f"{t['raw_bytes'] / 1e6:.1f} MB of logs in {t['files']} files ({t['cwds']} cwds), "
            f"{t['lines']:,} lines ({100 * t['noise_line_share']:.1f}% noise), {t['messages']:,} messages "
            f"({t['streamed_messages']:,} streamed, median {t.get('median_message_bytes', 0):,} bytes), "
            f"{t['searchable_text_bytes'] / 1e6:.1f} MB searchable text "
            f"({100 * t['cjk_share']:.0f}% CJK bytes, {100 * t['tool_result_share']:.0f}% in tool results)")


def add_knobs(ap: argparse.ArgumentParser) -> None:
    """The generator's knobs as command-line options (shared with run.py)."""
    ap.add_argument("--profile", choices=sorted(PROFILES), default="mixed", help="preset knobs (default mixed)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cjk-share", type=float, help="share of searchable bytes in CJK characters")
    ap.add_argument("--noise-share", type=float, help="share of lines that are noise (default 0.96)")
    ap.add_argument("--tool-share", type=float, help="share of searchable bytes in tool results (default 0.86)")
    ap.add_argument("--sessions", type=int, help="sessions (files); default two per MB")
    ap.add_argument("--cwds", type=int, help="distinct project folders (default 12)")
    ap.add_argument("--delta-share", type=float, help="share of answers streamed as deltas (default 0.1)")
    ap.add_argument("--noise-bytes", type=int, help="median payload of a noise line")


def params_from_args(args: argparse.Namespace) -> Params:
    return params_for(args.profile, args.size_mb, seed=args.seed, cjk_share=args.cjk_share,
                      noise_share=args.noise_share, tool_share=args.tool_share, sessions=args.sessions,
                      cwds=args.cwds, delta_share=args.delta_share, noise_bytes=args.noise_bytes)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Generate a deterministic corpus of canonical session logs.")
    ap.add_argument("--size-mb", type=float, required=True)
    add_knobs(ap)
    ap.add_argument("--out", type=Path, default=None, help="folder to write (default bench/out/corpus-...)")
    args = ap.parse_args(argv)
    p = params_from_args(args)
    root = args.out or corpus_dir(p, args.profile)
    c, reused = ensure(p, root)
    print(f"{'reused' if reused else 'generated'} {root}: {describe(c)}"
          + ("" if reused else f" in {c.manifest['seconds']:.1f} s"))
    for q in c.queries:
        print(f"  {q['category']:9} {q['query'] or ''}{'  question=' + q['question'] if q['question'] else ''}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def cpu() -> tuple[str, int]:
    """The CPU model and how many cores this process may use (for the
    machine line of a report)."""
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        nproc = len(os.sched_getaffinity(0))
    except AttributeError:
        nproc = os.cpu_count() or 0
    return model, nproc
