"""dsh-computers in scenarios: the client leg and the steps, for every backend.

`client.DshClient` is a user's browser and model-tool calls (keys, state,
computer_exec, rename, delete), recorded at its end like every client leg;
`steps.DshSteps` carries out a scenario's dsh steps and presence expects on
whichever backend runs it, reading what it needs (a computer's id, whether an
agent's stream is up) from the wire recording.
"""
