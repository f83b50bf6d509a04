"""The one trajectory type: extra_fields round trip, the historical JSON keys, and the sandbox fields of a call."""

from __future__ import annotations

import json

import numpy as np

from agentrl_recipe import fields
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
    columns = _recorded().to_extra_fields()
    assert columns[fields.TOOL_CALLS.column] == 3 and columns[fields.TOOL_FAILURES.column] == 1
    assert columns[fields.TOOL_INFRA_FAILURE.column] is True
    assert columns[fields.MALFORMED_TOOL_CALLS.column] == 1 and columns[fields.MALFORMED_KINDS.column] == ["bad_json"]
    assert columns[fields.VOID_TURN.column] is True and columns[fields.NUM_VOID_TURNS.column] == 1
    assert columns[fields.SANDBOX_SERVERS.column] == ["http://a:1"] and columns[fields.SANDBOX_LATENCY_S.column] == [
        0.2
    ]
    assert columns[fields.SANDBOX_FAILED.column] == ["http://b:2"]
    assert fields.MESSAGES.column not in columns  # only with record_messages


def test_extra_fields_keys_are_the_contract_with_verl_and_the_metrics():
    assert list(Trajectory().to_extra_fields()) == [
        fields.NUM_TURNS.column,
        fields.ASSISTANT_TURNS.column,
        fields.MODEL_TOKENS.column,
        fields.FINAL_TURN_START.column,
        fields.TOOL_CALLS.column,
        fields.TOOL_FAILURES.column,
        fields.TOOL_STATUSES.column,
        fields.TOOL_LATENCY_S.column,
        fields.MALFORMED_TOOL_CALLS.column,
        fields.MALFORMED_KINDS.column,
        fields.VOID_TURN.column,
        fields.NUM_VOID_TURNS.column,
        fields.TOOL_INFRA_FAILURE.column,
        fields.TERMINATION.column,
        fields.SANDBOX_SERVERS.column,
        fields.SANDBOX_LATENCY_S.column,
        fields.SANDBOX_FAILED.column,
    ]
    assert Trajectory().to_extra_fields()[fields.TERMINATION.column] == "no_tool_call"


def test_from_extra_fields_inverts_to_extra_fields():
    traj = _recorded()
    traj.messages = [{"role": "user", "content": "hi"}]
    back = Trajectory.from_extra_fields(traj.to_extra_fields())
    assert back.to_extra_fields() == traj.to_extra_fields()
    other_loop = Trajectory.from_extra_fields({fields.TOOL_CALLS.column: None})  # single_turn_agent rows: None
    assert (other_loop.tool_calls, other_loop.tool_statuses, other_loop.termination) == (0, [], None)
    assert Trajectory.from_extra_fields({fields.MALFORMED_KINDS.column: ["a", "b"]}).malformed_tool_calls == 2


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
