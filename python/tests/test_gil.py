"""The GIL is released while Rust computes: two Python threads are inside `forward` at the same
time (a test hook makes each call wait, without the GIL, until both are in)."""

import threading

import numpy as np
import pytest

from mase_rs import _native


def test_two_threads_run_forward_at_once(jsc_tiny, jsc_batch):
    other = jsc_tiny.__deepcopy__({})
    outs, errors = {}, []

    def run(name, mg):
        try:
            outs[name] = mg(jsc_batch)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    _native._arm_gil_probe(2)
    threads = [threading.Thread(target=run, args=(k, mg)) for k, mg in (("a", jsc_tiny), ("b", other))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    np.testing.assert_array_equal(outs["a"], outs["b"])


def test_probe_reports_a_lone_caller(jsc_tiny, jsc_batch):
    # One caller for two places: the wait ends with an error instead of hanging, as it would if
    # the GIL were held and the second thread could not enter.
    _native._arm_gil_probe(2, 0.05)
    with pytest.raises(ValueError, match="only 1 of 2 forward calls were inside Rust at once"):
        jsc_tiny(jsc_batch)
    # Disarmed after the failure: the next call runs.
    assert jsc_tiny(jsc_batch).shape == (64, 5)
