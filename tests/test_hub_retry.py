"""Which Hub failures are retried, how long each wait is, and that a permanent answer is never asked again
(layerswap/data/hub_retry.py). The waits are recorded, not slept: nothing here depends on timing. The same policy
against a real Hub-protocol server that resets, rate-limits and fails: tests/test_hub_replica.py (`-k transient`)."""

from __future__ import annotations

import errno
import io

import httpx2
import pytest
from huggingface_hub.errors import OfflineModeIsEnabled
from huggingface_hub.utils import hf_raise_for_status

from layerswap.data import hub_retry
from layerswap.data.hub_retry import Policy, call, transient
from layerswap.errors import UserError


def hub_answer(code: int, **headers) -> Exception:
    """The exception huggingface_hub raises for an HTTP answer (its own `hf_raise_for_status`)."""
    response = httpx2.Response(code, headers=headers, request=httpx2.Request("GET", "http://hub/api/datasets/a/b"))
    try:
        hf_raise_for_status(response)
    except Exception as err:  # noqa: BLE001
        return err
    raise AssertionError(f"{code} raised nothing")


def wrapped(inner: Exception) -> UserError:
    """A UserError raised while handling `inner`, `from None`, as layerswap's loaders do."""
    try:
        try:
            raise inner
        except Exception:
            raise UserError("cannot load dataset a/b: ...") from None
    except UserError as err:
        return err


@pytest.mark.parametrize(
    "err",
    [
        httpx2.ReadError("[Errno 104] Connection reset by peer"),
        httpx2.ConnectError("[Errno 111] Connection refused"),
        httpx2.ReadTimeout("timed out"),
        httpx2.RemoteProtocolError("peer closed connection without sending complete message body"),
        ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"),
        ConnectionError("Couldn't reach 'a/b' on the Hub (ReadError)"),  # what `datasets` raises
        OSError(errno.ETIMEDOUT, "Connection timed out"),
        hub_answer(503),
        hub_answer(502),
        hub_answer(500),
        hub_answer(408),
        hub_answer(429),
    ],
    ids=lambda e: type(e).__name__ + str(getattr(getattr(e, "response", None), "status_code", "")),
)
def test_network_failures_and_server_answers_are_transient(err):
    assert transient(err) is not None
    assert transient(wrapped(err)) is not None  # judged through the loaders' one-line UserError


@pytest.mark.parametrize(
    "err",
    [
        hub_answer(401, **{"X-Error-Code": "GatedRepo", "X-Error-Message": "Access to dataset a/b is restricted."}),
        hub_answer(403, **{"X-Error-Code": "GatedRepo", "X-Error-Message": "not in the authorized list"}),
        hub_answer(404, **{"X-Error-Code": "RepoNotFound"}),
        hub_answer(404, **{"X-Error-Code": "EntryNotFound"}),
        hub_answer(404, **{"X-Error-Code": "RevisionNotFound"}),
        hub_answer(404),
        hub_answer(400),
        OfflineModeIsEnabled("offline"),  # a ConnectionError, yet never worth a retry
        OSError("Consistency check failed: file should be of size 10 but has size 9"),  # a checksum/size mismatch
        OSError(errno.ENOSPC, "No space left on device"),
        ValueError("BuilderConfig 'x' not found"),
        UserError("no column 'output'"),
    ],
    ids=lambda e: type(e).__name__ + str(getattr(getattr(e, "response", None), "status_code", "")),
)
def test_permanent_answers_are_not_transient(err):
    assert transient(err) is None
    assert transient(wrapped(err)) is None


def test_a_local_cache_miss_after_a_reset_is_transient():
    """huggingface_hub answers a failed request by looking in the cache; its 'not in the cache' hides the reset."""
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        try:
            raise httpx2.ReadError("[Errno 104] Connection reset by peer")
        except httpx2.ReadError:
            raise LocalEntryNotFoundError("cannot find the requested files in the local cache")
    except LocalEntryNotFoundError as err:
        assert transient(err) is not None
    assert transient(LocalEntryNotFoundError("offline and not in the cache")) is None


class Flaky:
    """Fails with `errors` in turn, then returns 'done'; counts its calls."""

    def __init__(self, *errors):
        self.errors, self.calls = list(errors), 0

    def __call__(self):
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


def test_transient_failures_are_retried_with_doubling_waits_and_a_line_each():
    out, waits = io.StringIO(), []
    fn = Flaky(httpx2.ReadError("[Errno 104] Connection reset by peer"), hub_answer(503), hub_answer(502))
    assert call("dataset a/b", fn, Policy(tries=5, first_wait=2, max_wait=60), out, sleep=waits.append) == "done"
    assert fn.calls == 4 and waits == [2, 4, 8]
    lines = out.getvalue().splitlines()
    assert lines == [
        "retry 1/4 in 2.0 s: dataset a/b: ReadError: [Errno 104] Connection reset by peer",
        "retry 2/4 in 4.0 s: dataset a/b: HTTP 503",
        "retry 3/4 in 8.0 s: dataset a/b: HTTP 502",
    ]


def test_retry_after_is_waited_within_the_cap_and_backoff_is_capped():
    waits = []
    fn = Flaky(hub_answer(429, **{"Retry-After": "7"}), hub_answer(429, **{"Retry-After": "600"}), hub_answer(503))
    call("x", fn, Policy(tries=4, first_wait=5, max_wait=20), io.StringIO(), sleep=waits.append)
    assert waits == [7, 20, 20]  # as asked; capped at max_wait; 5 * 2**2 = 20, capped


def test_a_persistent_failure_ends_after_the_bounded_tries_with_the_last_error():
    out, waits = io.StringIO(), []
    fn = Flaky(*[httpx2.ReadError("reset")] * 10)
    with pytest.raises(httpx2.ReadError):
        call("x", fn, Policy(tries=3, first_wait=1, max_wait=60), out, sleep=waits.append)
    assert fn.calls == 3 and waits == [1, 2] and len(out.getvalue().splitlines()) == 2


@pytest.mark.parametrize("code", [401, 403, 404])
def test_a_gated_or_missing_answer_is_asked_once(code):
    out, waits = io.StringIO(), []
    fn = Flaky(wrapped(hub_answer(code, **({"X-Error-Code": "GatedRepo"} if code != 404 else {}))))
    with pytest.raises(UserError):
        call("x", fn, Policy(), out, sleep=waits.append)
    assert fn.calls == 1 and waits == [] and out.getvalue() == ""


def test_policy_refuses_bounds_that_make_no_sense():
    for bad in ({"tries": 0}, {"first_wait": -1}, {"first_wait": 10, "max_wait": 5}):
        with pytest.raises(ValueError):
            Policy(**bad)
    assert hub_retry.Policy().tries >= 2  # the default retries at all
