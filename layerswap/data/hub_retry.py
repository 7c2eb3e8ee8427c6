"""Hub reads that survive a flaky network: one artefact's check or download, retried while it fails for a transient
reason, with bounded exponential backoff and a printed line per retry; a permanent answer fails at once.

Transient: a connection reset, refused or aborted, a timeout, a response cut short, and the HTTP answers 408, 429
(waiting what its Retry-After says, within `Policy.max_wait`) and 5xx. Permanent: everything else, in particular a
gated repository (401/403), a missing repository, file or revision (404), a bad request, offline mode, and a
checksum or size mismatch of a downloaded file (an OSError without a network errno). An error that wraps another (a
`UserError` raised while handling a reset, huggingface_hub's "cannot find the requested files in the local cache"
after a failed request, `datasets`' ConnectionError) is judged by the first link of its chain that says either.

Why a retry of our own around each artefact, and what huggingface_hub already does: huggingface_hub retries some of
its requests itself (`http_backoff` / `http_stream_backoff`: the file GETs of `hf_hub_download` and `HfFileSystem`
reads, 5 retries, 1-8 s, 429's Retry-After honoured), which we keep and do not duplicate per request. It does not
retry its metadata requests (the HEAD before each download, `HfApi.list_repo_tree`, `dataset_info`, `model_info`,
`paths-info`), and nothing retries what `datasets` and `transformers` do around them (module resolution, builder
configs, streamed reads through fsspec). Retrying the whole artefact covers all of these: each check streams and
each download resumes from what the cache holds, so a second attempt repeats only what failed. Worst case per
artefact: `tries` attempts, each possibly with huggingface_hub's own retries inside (a persistent 5xx on a file GET:
~23 s per attempt), so bounded. The waiting and stopping is tenacity's (a well-kept retry library, already installed
with Snakemake); which errors are transient is ours, because no library knows the chains these three libraries build.
"""

from __future__ import annotations

import errno
import sys
from dataclasses import dataclass
from typing import Callable, TypeVar

import tenacity

T = TypeVar("T")

#: HTTP answers worth asking again: request timeout, rate limit, server errors (huggingface_hub's own list)
TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})
#: OS errors of the network, not of the disk
TRANSIENT_ERRNO = frozenset(
    {
        errno.ECONNRESET,
        errno.ECONNREFUSED,
        errno.ECONNABORTED,
        errno.ETIMEDOUT,
        errno.EPIPE,
        errno.EHOSTUNREACH,
        errno.ENETUNREACH,
        errno.ENETDOWN,
    }
)


@dataclass(frozen=True)
class Policy:
    """At most `tries` attempts per artefact; waits of `first_wait`, doubling, each at most `max_wait` seconds (a
    429's Retry-After is waited as given, up to `max_wait`). The defaults sum to at most 2+4+8+16 = 30 s of waiting."""

    tries: int = 5
    first_wait: float = 2.0
    max_wait: float = 60.0

    def __post_init__(self):
        if self.tries < 1 or self.first_wait < 0 or self.max_wait < self.first_wait:
            raise ValueError(f"retry policy: tries >= 1 and 0 <= first_wait <= max_wait ({self})")


@dataclass(frozen=True)
class Transient:
    """Why an error is worth another try, and how long its answer asked us to wait (Retry-After), if it did."""

    reason: str
    retry_after: float | None = None


def _chain(err: BaseException):
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        yield err
        err = err.__cause__ or err.__context__


def _status(err: BaseException) -> int | None:
    response = getattr(err, "response", None)
    status = getattr(response, "status_code", None) or getattr(err, "status", None)  # httpx/requests; aiohttp
    return status if isinstance(status, int) else None


def _retry_after(err: BaseException) -> float | None:
    headers = getattr(getattr(err, "response", None), "headers", None) or {}
    value = headers.get("retry-after") or headers.get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None  # an HTTP date: wait the backoff instead


def _network_types() -> tuple[type[BaseException], ...]:
    """Exception types of the HTTP clients these libraries use that mean the network failed, not the request."""
    types: list[type[BaseException]] = [ConnectionError, TimeoutError]
    for module, names in (
        ("httpx2", ("TimeoutException", "NetworkError", "RemoteProtocolError")),
        ("httpx", ("TimeoutException", "NetworkError", "RemoteProtocolError")),
        ("requests", ("ConnectionError", "Timeout")),
        ("aiohttp", ("ClientConnectionError", "ClientPayloadError", "ServerTimeoutError")),
    ):
        try:
            mod = __import__(module)
        except ImportError:
            continue
        types += [getattr(mod, n) for n in names if isinstance(getattr(mod, n, None), type)]
    return tuple(types)


def _permanent_types() -> tuple[type[BaseException], ...]:
    from huggingface_hub.errors import (
        BadRequestError,
        DisabledRepoError,
        OfflineModeIsEnabled,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    # GatedRepoError is a RepositoryNotFoundError
    return (
        RepositoryNotFoundError,
        RevisionNotFoundError,
        RemoteEntryNotFoundError,
        DisabledRepoError,
        BadRequestError,
        OfflineModeIsEnabled,
    )


def transient(err: BaseException) -> Transient | None:
    """A `Transient` when `err` (or what it wraps) is a network failure or a 408/429/5xx answer; None when it is a
    permanent answer or not a network error at all."""
    permanent, network = _permanent_types(), _network_types()
    for link in _chain(err):
        if isinstance(link, permanent):
            return None
        status = _status(link)
        if status is not None:
            return Transient(f"HTTP {status}", _retry_after(link)) if status in TRANSIENT_STATUS else None
        if isinstance(link, network) or (isinstance(link, OSError) and link.errno in TRANSIENT_ERRNO):
            return Transient(f"{type(link).__name__}: {str(link).splitlines()[0] if str(link) else ''}".rstrip(": "))
    return None


def call(what: str, fn: Callable[[], T], policy: Policy = Policy(), out=None, sleep=None) -> T:
    """`fn()`, tried again while it fails for a transient reason (`transient`), at most `policy.tries` times; one
    line per retry on `out` (`retry <n>/<max> in <s> s: <what>: <reason>`). The last error is raised as it was."""
    out = out or sys.stdout

    def wait(state: tenacity.RetryCallState) -> float:
        backoff = min(policy.max_wait, policy.first_wait * 2 ** (state.attempt_number - 1))
        after = transient(state.outcome.exception()).retry_after
        return min(policy.max_wait, after) if after is not None else backoff

    def announce(state: tenacity.RetryCallState) -> None:
        why = transient(state.outcome.exception()).reason
        # one write per line: the pre-flight check retries in several threads at once (print writes text and end apart)
        out.write(
            f"retry {state.attempt_number}/{policy.tries - 1} in {state.next_action.sleep:.1f} s: {what}: {why}\n"
        )
        out.flush()

    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(policy.tries),
        wait=wait,
        retry=tenacity.retry_if_exception(lambda e: transient(e) is not None),
        before_sleep=announce,
        reraise=True,
        **({"sleep": sleep} if sleep else {}),
    )
    return retrying(fn)
