"""Text made safe for a terminal: no escape sequences, control characters or bidi controls from facts,
logs, file names or values. No imports beyond ``re``: tfgpu.core.errors and tfgpu.core.safety both use it."""

from __future__ import annotations

import re
from collections.abc import Callable

#: C0 controls (tab included), DEL and the C1 controls (U+0080..U+009F: 8-bit CSI/OSC on some terminals),
#: and Unicode's bidirectional controls (LRM/RLM, ALM, embeddings, overrides, isolates: the "Trojan
#: Source" characters, CVE-2021-42574), which reorder what a terminal shows.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
#: Escape sequences (CSI ... final byte; OSC ... BEL or ST, OSC 8 links included; other ESC X), then any
#: control character left (a lone ESC, a carriage return that would redraw the line).
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]|\x9b[0-?]*[ -/]*[@-~]")


_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape_control(m: re.Match[str]) -> str:
    c = m.group(0)
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(c, f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def terminal_safe(text: str, *, keep_newlines: bool = True) -> str:
    """``text`` without escape sequences (ANSI CSI, OSC including OSC 8 links) or other control
    characters, for a terminal: facts, logs and names come from elsewhere and must not redraw the
    screen, set the window title or hide a link. Newlines (and tabs) stay when ``keep_newlines``."""
    if _SURROGATE.search(text):  # a lone surrogate cannot be written to a UTF-8 terminal at all
        text = _SURROGATE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)
    if not _CONTROL.search(text):
        return text
    text = _ANSI.sub("", text)

    def esc(m: re.Match[str]) -> str:
        c = m.group(0)
        if keep_newlines and c in "\n\t":
            return c
        return _escape_control(m)

    return _CONTROL.sub(esc, text)


#: GitHub Actions reads a line starting with ``::`` (after whitespace) as a workflow command, and
#: ``::stop-commands::`` turns the parser off. Escaping the first colon stops both.
_WORKFLOW = re.compile(r"^(\s*):(?=:)", re.MULTILINE)
#: The older syntax, ``##[command]``, is found anywhere in a line.
_WORKFLOW_V1 = re.compile(r"##\[")


def workflow_safe(text: str, *, at_line_start: bool = True) -> str:
    """``text`` with no line a GitHub Actions runner would take as a workflow command (``::error``,
    ``::stop-commands::``, ``::add-mask::``...): the leading ``::`` becomes ``%3A:`` (the runner's own
    escape for a colon in a command's data). ``at_line_start`` False: ``text`` continues a line, so its
    first line is not a line start (only the lines after its first newline are)."""
    if not at_line_start:
        head, newline, rest = text.partition("\n")
        return _WORKFLOW_V1.sub("#%23[", head) + newline + (workflow_safe(rest) if newline else "")
    return _WORKFLOW_V1.sub("#%23[", _WORKFLOW.sub(r"\1%3A", text))


# --------------------------------------------------------------------------- the one secrets mask

#: The part of a secret's match shown as it is (a key name, "Bearer ", "/t/"): the mask replaces the rest.
_KEPT = (
    r"(?i:bearer\s{1,20}"
    r"|authorization[\"']?\s{0,20}[=:]\s{0,20}[\"']?[A-Za-z]{1,20}\s{1,20}"
    r"|(?:token|secret|password|passwd|api[_-]?key|access[_-]?key)\w{0,40}[\"']?\s{0,20}[=:](?!=)\s{0,20}"
    r"|--(?:token|secret|password|passwd|api[_-]?key|access[_-]?key)(?:=|\s{1,20})"
    r"|(?:login|machine|account)\s{1,20}\S{1,256}\s{1,20}password\s{1,20}"
    r"|[?&;](?:x-amz-signature|x-amz-security-token|x-amz-credential|x-goog-signature|x-goog-credential|sig"
    r"|signature|policy)="
    r"|/t/)"
)
#: Secrets in free text. No capturing group (each one costs the engine its fast paths: ~3x on long text); the
#: kept part of a match is found again by :data:`_KEPT`. Every repetition is bounded: an unbounded one that can
#: fail is tried again at each start. Real keys, tokens and passwords fit the bounds.
_SECRETS = "|".join((
    # a private key pasted into a log: the whole block
    r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----|\Z)",
    # tokens with a known shape: GitHub, GitLab, Slack, AWS key ids, Hugging Face, OpenAI-style, PyPI upload,
    # Google API keys, NVIDIA NGC API keys (nvapi-)
    r"gh[pousr]_[A-Za-z0-9]{20,255}|github_pat_[A-Za-z0-9_]{20,255}|glpat-[A-Za-z0-9_-]{20,255}|"
    r"xox[abpr]-[A-Za-z0-9-]{10,255}|AKIA[0-9A-Z]{16}|hf_[A-Za-z0-9]{20,255}|sk-[A-Za-z0-9_-]{20,255}|"
    r"pypi-[A-Za-z0-9_-]{16,512}|AIza[0-9A-Za-z_-]{30,255}|nvapi-[A-Za-z0-9_-]{20,255}",
    r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{10,4096}\.[A-Za-z0-9_-]{10,4096}\.[A-Za-z0-9_-]{10,4096}",  # a JWT
    r"(?i:bearer\s{1,20})[A-Za-z0-9._~+/-]{16,4096}=*",
    # an Authorization header of any scheme (token, Basic, Digest...)
    r"(?i:authorization[\"']?\s{0,20}[=:]\s{0,20}[\"']?[A-Za-z]{1,20}\s{1,20})[A-Za-z0-9._~+/-]{8,4096}=*",
    # KEY=value and KEY: value, also inside longer names (AWS_SECRET_ACCESS_KEY=..., HF_TOKEN=...), a quoted
    # value whole (spaces included), JSON's "key": "value"; never a requirement (tokenizers==0.15)
    r"(?i:(?:token|secret|password|passwd|api[_-]?key|access[_-]?key)\w{0,40}[\"']?\s{0,20}[=:](?!=)\s{0,20})"
    r"(?:\"[^\"\n]{0,4096}\"?|'[^'\n]{0,4096}'?|\S{1,4096})",
    # command-line flags: --password VALUE, --token=VALUE
    r"(?i:--(?:token|secret|password|passwd|api[_-]?key|access[_-]?key)(?:=|\s{1,20}))\S{1,4096}",
    # a netrc line: machine HOST login USER password VALUE
    r"(?i:\b(?:login|machine|account)\s{1,20}\S{1,256}\s{1,20}password\s{1,20})\S{1,4096}",
    # signed URLs: S3 presigned, Azure SAS, Google Cloud Storage, CloudFront (the signature, policy, token)
    r"(?i:[?&;](?:x-amz-signature|x-amz-security-token|x-amz-credential|x-goog-signature|x-goog-credential|sig"
    r"|signature|policy)=)[^&\s#'\"<>]{1,4096}",
    # anaconda.org's private channels: https://conda.anaconda.org/t/TOKEN/ORG (conda shows /t/<TOKEN>/)
    r"/t/[A-Za-z0-9][A-Za-z0-9_.-]{5,255}(?=/)",
))
_COMPILED: list[re.Pattern[str]] = []
#: A cheap first look (substrings, no pattern): text with none of these holds no secret the mask knows.
_MAYBE = ("key", "token", "secret", "passw", "bearer", "auth", "login", "machine", "account", "sig", "polic",
          "credential", "/t/", "gh", "glpat", "xox", "akia", "hf_", "sk-", "pypi-", "aiza", "nvapi", "eyj")


def _mask_patterns() -> list[re.Pattern[str]]:
    if not _COMPILED:  # compiled on first use: ~2 ms that most commands never need
        _COMPILED.extend((re.compile(_SECRETS), re.compile(r"(?im)^.*\blogin\b.*$"),
                          re.compile(r"(\s-p(?:=|\s{1,20}))(?!-)\S{1,4096}"), re.compile(_KEPT)))
    return _COMPILED


def mask_secrets(text: str, mark: str = "****", *, keep_user: bool = True) -> str:
    """``text`` with every secret tfgpu can recognise replaced by ``mark``: URL credentials (``keep_user``:
    ``alice:****@host``, as pip and uv print them; else ``<mark>@host``), tokens and keys of known shapes,
    ``KEY=value`` and ``--password VALUE``, ``docker login -p``, netrc passwords, signed-URL signatures,
    anaconda.org channel tokens. The one mask: the step text, logs and notes a command prints (``****``) and
    ``--redact`` (``<redacted>``) use it, on a value before any quoting."""
    if "://" in text:
        text = _url_credentials(text, lambda user, pw: f"{user}:{mark}@" if keep_user and pw else f"{mark}@")
    low = text.lower()
    if not any(k in low for k in _MAYBE):
        return text  # the common case, without the big pattern
    secrets, login_line, short_flag, kept = _mask_patterns()
    if "login" in low:  # `docker login -p VALUE` (podman, helm registry...): -p is a password on a login line only
        text = login_line.sub(lambda line: short_flag.sub(lambda m: m.group(1) + mark, line.group(0)), text)
    return secrets.sub(lambda m: _kept(kept, m.group(0)) + mark, text)


def _kept(kept: re.Pattern[str], found: str) -> str:
    head = kept.match(found)
    return head.group(0) if head else ""


#: How far after ``://`` credentials are looked for, and where they end: a URL ends at whitespace.
_URL_SPAN = 1024
_WHITESPACE = re.compile(r"\s")


def _url_credentials(text: str, replace: Callable[[str, bool], str]) -> str:
    """Each URL's credentials (``user`` or ``user:password``, up to the *last* ``@`` of the URL: a password
    may hold ``@``, quotes and ``/``, as in ``s3://KEY:SECRET/x@bucket``; urllib splits at the last ``@``
    too) replaced by ``replace(user, has_password)``. A scan, not a pattern: hostile text (``://a:b`` over and
    over, no ``@``) costs one bounded look per ``://``."""
    out: list[str] = []
    done = 0
    found = text.find("://")
    while found != -1:
        start = found + 3
        at_next = text.find("@", start)
        if at_next == -1:  # no credentials anywhere after here (the common case)
            break
        if at_next - start > _URL_SPAN:  # none within reach of this URL: on to the first that could reach it
            found = text.find("://", max(start, at_next - _URL_SPAN - 3))
            continue
        end = _WHITESPACE.search(text, start, start + _URL_SPAN)
        stop = end.start() if end else min(len(text), start + _URL_SPAN)
        at = text.rfind("@", start, stop)
        user, colon, _pw = text[start:at].partition(":") if at != -1 else ("", "", "")
        if user and "/" not in user:
            out += [text[done:start], replace(user, bool(colon))]
            done = at + 1
        found = text.find("://", max(start, done))
    return "".join(out) + text[done:] if out else text




_TOKEN_PATH = re.compile(r"/t/[A-Za-z0-9][A-Za-z0-9_.-]{5,255}(?=/)")


def without_credentials(url: str) -> tuple[str, bool]:
    """``url`` without the credentials it carries (``user:password@``, anaconda.org's ``/t/TOKEN``), and
    whether it carried any: what a file made to be shared (a lockfile) records."""
    clean = _TOKEN_PATH.sub("", _url_credentials(url, lambda _user, _pw: ""), count=1)
    return clean, clean != url
