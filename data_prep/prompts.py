"""The original's prompt texts, reproduced exactly, and the per-source prompt builders.

Open-AgentRL (``recipe/demystify/reward.py``) rewrites prompts at load time in ``CustomRLHFDataset``, choosing one
map function for a whole file from its *first* row. We bake the same texts into the parquet instead, chosen per row,
so stock ``RLHFDataset`` trains on exactly the prompts the paper's model saw. Typos in the original ("sumbit", the
stray quote at the end of the LCB code prompt, the unclosed fence) are kept on purpose: they are part of the prompt
distribution the released checkpoints were trained and evaluated on.
"""

from __future__ import annotations

# --- verbatim literals from recipe/demystify/reward.py ---
ANSWER_FORMAT = (
    "\nRemember once you make sure the current answer is your final answer, do not call the tools again and directly "
    "output the final answer in the following text format, the answer format must be: "
    "\\boxed{'The final answer goes here.'}."
)
MATH_PROMPT_1 = "Analyze and solve the following math problem step by step. \n\n"
MATH_PROMPT_2 = (
    "\n\nThe tool could be used for more precise and efficient calculation and could help you to verify your result "
    "before you reach the final answer."
)
AGENT_PROMPT = (
    "\n\n**Note: You should first analyze the problem and form a high-level solution strategy, then utilize the "
    "tools to help you solve the problem.**"
)
CODE_SUBMIT = (
    "\nBefore sumbit your code, you can utilize tools to check the correctness of your code, once you make sure the "
    "current code is correct, do not call the tools again and submit your code within ```python\n# YOUR CODE HERE\n```."
)
# map_fn2 (math_dapo, mega-science) and map_fn_skywork (math) differ by one word: "the final numerical value".
NO_UNITS_DAPO = (
    "\nDo not put units of the final answer inside \\boxed{}. The content of \\boxed{} should be the numerical value "
    "of the final answer only, without any units."
)
NO_UNITS_SKYWORK = (
    "\nDo not put units of the final answer inside \\boxed{}. The content of \\boxed{} should be the final numerical "
    "value of the final answer only, without any units."
)
GPQA_LETTER = "\n Here you need to put the final uppercase letter option of this problem into \\boxed{}"
LCB_START = (
    "You will be given a question (problem specification) and will generate a correct Python program that matches "
    "the specification and passes all tests.\n\n"
)
LCB_EXAMPLES_HEAD = "\nHere are some input and output examples of the expected code:\nInput:"
LCB_CODE_PROMPT = (
    "\n\nRead the inputs from stdin solve the problem and write the answer to stdout (do not directly test on the "
    "sample inputs). Enclose your code within delimiters as follows. Ensure that when the python program runs, it "
    'reads the inputs, runs the algorithm and writes output to STDOUT.\n```python\n# YOUR CODE HERE\n"'
)
# LiveCodeBench's own starter-code line (lcb_runner/prompts/code_generation.py); used to put a functional problem's
# starter code into ``problem`` (the Open-AgentRL file's problems are assumed to carry it; UNCONFIRMED).
LCB_STARTER_CODE = (
    "### Format: You will use the following starter code to write the solution to the problem and enclose your code "
    "within delimiters.\n```python\n{starter_code}\n```"
)

# --- DAPO-Math-17k's own wrapper, already inside its stored prompts (stripped to get the bare problem) ---
DAPO_PREFIX = (
    "Solve the following math problem step by step. The last line of your response should be of the form "
    "Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n"
)
DAPO_SUFFIX = '\n\nRemember to put your answer on its own line after "Answer:".'


def math_agent_prompt(problem: str) -> str:
    """map_fn (AIME): math_prompt_1 + problem + math_prompt_2 + agent_prompt + answer_format."""
    return MATH_PROMPT_1 + problem + MATH_PROMPT_2 + AGENT_PROMPT + ANSWER_FORMAT


def skywork_math_prompt(content: str) -> str:
    """map_fn_skywork, math/science rows."""
    return math_agent_prompt(content) + NO_UNITS_SKYWORK


def code_agent_prompt(content: str) -> str:
    """map_fn_skywork, code rows (``'code' in data_source``)."""
    return content + AGENT_PROMPT + CODE_SUBMIT


def dapo_prompt(content: str) -> str:
    """map_fn2 (math_dapo, mega-science): the stored content plus the "no units" sentence."""
    return content + NO_UNITS_DAPO


def gpqa_prompt(problem: str, domain: str) -> str:
    """map_fn_gpqa."""
    return (
        f"Analyze and solve the following {domain} problem step by step. \n\n"
        + problem
        + MATH_PROMPT_2
        + AGENT_PROMPT
        + ANSWER_FORMAT
        + GPQA_LETTER
    )


def lcb_prompt(problem: str, public_inputs: list[str], public_outputs: list[str]) -> str:
    """map_lcb: public examples pasted as the Python ``repr`` of the input and output lists, as the original does."""
    examples = LCB_EXAMPLES_HEAD + str(public_inputs) + "\nOutput:\n" + str(public_outputs)
    return LCB_START + problem + examples + AGENT_PROMPT + LCB_CODE_PROMPT + CODE_SUBMIT


def strip_dapo_wrapper(content: str) -> str:
    """The bare problem inside a DAPO prompt (the text used for dedup, decontamination and the teacher)."""
    text = content
    if text.startswith(DAPO_PREFIX):
        text = text[len(DAPO_PREFIX) :]
    if text.endswith(DAPO_SUFFIX):
        text = text[: -len(DAPO_SUFFIX)]
    return text.strip()
