"""Boolean arguments of every function: True/False, NumPy's bools and the
ints 0/1 are taken as bools; anything else is a TypeError naming the argument
(the core's bindings would otherwise refuse it with their own signature)."""

import numpy as np
import pytest

import tally


def calls():
    x = np.linspace(0.25, 2.0, 8)
    keys = np.array([0, 1, 1, 0, 1, 1, 0, 1], np.int64)
    return {
        ("sum", "compensated"): lambda v: tally.sum(x, compensated=v),
        ("reduce", "compensated"): lambda v: tally.reduce(x, "sum", compensated=v),
        ("dot", "compensated"): lambda v: tally.dot(x, x, compensated=v),
        ("histogram", "deterministic"): lambda v: tally.histogram(x, bins=3, range=(0, 2), weights=x,
                                                                  deterministic=v)[0],
        ("histogram", "check_weights"): lambda v: tally.histogram(x, bins=3, range=(0, 2), weights=x,
                                                                  deterministic=True, check_weights=v)[0],
        ("histogram", "return_edges"): lambda v: tally.histogram(x, bins=3, range=(0, 2), return_edges=v),
        ("bincount", "deterministic"): lambda v: tally.bincount(keys, weights=x, deterministic=v),
        ("bincount", "check_weights"): lambda v: tally.bincount(keys, weights=x, deterministic=True,
                                                                check_weights=v),
        ("scatter_add", "deterministic"): lambda v: tally.scatter_add(np.zeros(2), keys, x, deterministic=v),
        ("scatter_add", "check_indices"): lambda v: tally.scatter_add(np.zeros(2), keys, x, check_indices=v),
        ("scatter_reduce", "check_indices"): lambda v: tally.scatter_reduce(np.zeros(2), keys, x, "amax",
                                                                           check_indices=v),
        ("index_add", "deterministic"): lambda v: tally.index_add(np.zeros((2, 1)), keys, x[:, None],
                                                                  deterministic=v),
        ("index_add", "check_indices"): lambda v: tally.index_add(np.zeros((2, 1)), keys, x[:, None],
                                                                  check_indices=v),
        ("cg", "pipelined"): lambda v: tally.cg(tally.Poisson(2), x, pipelined=v)[0],
        ("cg", "history"): lambda v: tally.cg(tally.Poisson(2), x, history=v)[0],
    }


def same(a, b):
    if isinstance(a, tuple):
        return all(same(p, q) for p, q in zip(a, b)) and len(a) == len(b)
    return np.asarray(a).tobytes() == np.asarray(b).tobytes()


@pytest.mark.parametrize("key", list(calls()))
def test_bool_like_values_act_as_bools(key):
    call = calls()[key]
    for truth in (True, False):
        want = call(truth)
        for value in (np.bool_(truth), np.array(truth), int(truth)):
            assert same(call(value), want), (key, value)


@pytest.mark.parametrize("key", list(calls()))
def test_other_values_name_the_argument(key):
    function, argument = key
    for value in ("yes", 2, None, 0.5):
        with pytest.raises(TypeError, match=rf"tally\.{function}: argument '{argument}' must be a bool"):
            calls()[key](value)
