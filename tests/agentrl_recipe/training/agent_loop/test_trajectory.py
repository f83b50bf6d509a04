"""The one trajectory type: extra_fields round trip, the historical JSON keys, and the sandbox fields of a call."""

from __future__ import annotations

import json

import numpy as np

from agentrl_recipe import names
from agentrl_recipe.training import sandbox_routes
from agentrl_recipe.training.agent_loop.trajectory import EVAL_KEYS, RECORD_KEYS, TOKEN_KEYS, Trajectory, plain


def _recorded() -> Trajectory:
    traj = Trajectory()
    traj.record_call("ok", 0.5, {})
    traj.record_call("infra_error", 1.5, {sandbox_routes.SERVER: "http://a:1", sandbox_routes.LATENCY_S: 0.2})
    traj.record_call("ok", 0.1, {sandbox_routes.SERVER: "", sandbox_routes.FAILED: ["http://b:2"]})
    traj.record_malformed("bad_json")
    traj.record_void_turn()
    traj.num_turns, traj.assistant_turns, traj.model_tokens, traj.termination = 8, 4, 30, "answer"
    return traj


def test_record_call_keeps_the_counts_the_loop_writes():
    fields = _recorded().to_extra_fields()
    assert fields[names.FIELD_TOOL_CALLS] == 3 and fields[names.FIELD_TOOL_FAILURES] == 1
    assert fields[names.FIELD_TOOL_INFRA_FAILURE] is True
    assert fields[names.FIELD_MALFORMED_TOOL_CALL] == 1 and fields[names.FIELD_MALFORMED_KINDS] == ["bad_json"]
    assert fields[names.FIELD_VOID_TURN] is True and fields[names.FIELD_NUM_VOID_TURNS] == 1
    assert fields[names.FIELD_SANDBOX_SERVERS] == ["http://a:1"] and fields[names.FIELD_SANDBOX_LATENCY_S] == [0.2]
    assert fields[names.FIELD_SANDBOX_FAILED] == ["http://b:2"]
    assert names.FIELD_MESSAGES not in fields  # only with record_messages


def test_extra_fields_keys_are_the_contract_with_verl_and_the_metrics():
    assert list(Trajectory().to_extra_fields()) == [
        names.FIELD_NUM_TURNS,
        names.FIELD_ASSISTANT_TURNS,
        names.FIELD_MODEL_TOKENS,
        names.FIELD_TOOL_CALLS,
        names.FIELD_TOOL_FAILURES,
        names.FIELD_TOOL_STATUSES,
        names.FIELD_TOOL_LATENCY_S,
        names.FIELD_MALFORMED_TOOL_CALL,
        names.FIELD_MALFORMED_KINDS,
        names.FIELD_VOID_TURN,
        names.FIELD_NUM_VOID_TURNS,
        names.FIELD_TOOL_INFRA_FAILURE,
        names.FIELD_TERMINATION,
        names.FIELD_SANDBOX_SERVERS,
        names.FIELD_SANDBOX_LATENCY_S,
        names.FIELD_SANDBOX_FAILED,
    ]
    assert Trajectory().to_extra_fields()[names.FIELD_TERMINATION] == "no_tool_call"


def test_from_extra_fields_inverts_to_extra_fields():
    traj = _recorded()
    traj.messages = [{"role": "user", "content": "hi"}]
    back = Trajectory.from_extra_fields(traj.to_extra_fields())
    assert back.to_extra_fields() == traj.to_extra_fields()
    other_loop = Trajectory.from_extra_fields({names.FIELD_TOOL_CALLS: None})  # single_turn_agent rows: None
    assert (other_loop.tool_calls, other_loop.tool_statuses, other_loop.termination) == (0, [], None)
    assert Trajectory.from_extra_fields({names.FIELD_MALFORMED_KINDS: ["a", "b"]}).malformed_tool_calls == 2


def test_json_records_keep_their_keys():
    traj = _recorded()
    assert list(traj.to_dict()) == [k for k in RECORD_KEYS if k not in TOKEN_KEYS]
    assert RECORD_KEYS[:6] == ("row_index", "sample_index", "data_source", "prompt", "response", "messages")
    assert list(traj.to_dict(tokens=True)) == list(RECORD_KEYS)
    assert list(traj.eval_fields()) == list(EVAL_KEYS)
    json.dumps(traj.to_dict(tokens=True))
    again = Trajectory.from_record(json.loads(json.dumps(traj.to_dict())))
    assert again.eval_fields() == traj.eval_fields()


def test_plain_turns_numpy_values_into_python_ones():
    assert plain(np.int64(3)) == 3 and type(plain(np.int64(3))) is int
    assert plain(np.array([1, 2])) == [1, 2] and plain(["x"]) == ["x"] and plain("s") == "s"
