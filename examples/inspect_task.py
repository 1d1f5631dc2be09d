"""An Inspect AI task whose samples run in agentenv sandboxes (``sandbox="agentenv"``),
offline: Inspect's ``mockllm`` model plays a scripted agent that calls Inspect's ``bash``
tool and submits, and the scorer reads the file it wrote from the sandbox.

    pip install 'agentenv[inspect]'
    inspect eval examples/inspect_task.py
"""

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import (
    ChatCompletionChoice,
    ChatMessageAssistant,
    Model,
    ModelOutput,
    ModelUsage,
    get_model,
)
from inspect_ai.scorer import Score, Target, accuracy, scorer
from inspect_ai.solver import TaskState, basic_agent
from inspect_ai.tool import ToolCall, bash
from inspect_ai.util import sandbox

EPOCHS = 3
COMMAND = "uname -s > answer.txt && cat answer.txt"


def scripted_model() -> Model:
    """mockllm answering every sample the same way: one turn calling ``bash`` and ``submit``
    (so samples running at once cannot take each other's turns). Usage is given: without it
    mockllm counts tokens with an encoding it would download."""
    outputs = []
    for _ in range(EPOCHS):
        calls = [
            ToolCall(id="bash-1", function="bash", arguments={"command": COMMAND}),
            ToolCall(id="submit-1", function="submit", arguments={"answer": "done"}),
        ]
        message = ChatMessageAssistant(content="", tool_calls=calls, model="model")
        output = ModelOutput(
            model="mockllm/model",
            choices=[ChatCompletionChoice(message=message, stop_reason="tool_calls")],
            usage=ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15),
        )
        outputs.append(output)
    return get_model("mockllm/model", custom_outputs=outputs)


@scorer(metrics=[accuracy()])
def answer_file():  # type: ignore[no-untyped-def]
    """Correct when the sandbox's answer.txt holds the target."""

    async def score(state: TaskState, target: Target) -> Score:
        try:
            text = (await sandbox().read_file("answer.txt")).strip()
        except FileNotFoundError:
            return Score(value="I", answer="", explanation="no answer.txt")
        return Score(value="C" if text == target.text else "I", answer=text)

    return score


@task
def kernel_name() -> Task:
    """Write the kernel's name to answer.txt, in an agentenv sandbox."""
    return Task(
        dataset=[Sample(input="Write the kernel's name to answer.txt.", target="Linux")],
        solver=basic_agent(tools=[bash()], max_attempts=1),
        scorer=answer_file(),
        sandbox="agentenv",
        model=scripted_model(),
        epochs=EPOCHS,
    )
