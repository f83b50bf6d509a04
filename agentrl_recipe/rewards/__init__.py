"""Rewards: per-row scorers (:mod:`.scoring`), sandboxed code grading (:mod:`.code_grading`) and the
``agentrl_reward`` verl reward manager (:mod:`.manager`). See the README's *Rewards* section."""
