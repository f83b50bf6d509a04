"""The multi-turn hermes tool loop: ``agentrl_tool_agent`` (:mod:`.loop`), its settings, the ``code_interpreter``
tool it calls, and the one trajectory type (:mod:`.trajectory`) the rest of the recipe reads."""
