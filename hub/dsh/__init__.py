"""The hub side of the dsh-computers protocol, on the hub's aiohttp application.

`core.DshHubCore` decides everything (enrollment keys, tokens, presence,
stream replacement, exec and file dispatch, chunk reassembly, background
jobs) without I/O; `server.DshServer` mounts the spec's routes under
`/api/dsh-computers` and the client API's tools under `/v1/computers`, and
carries out the core's actions. State lives in the hub's SQLite store.
"""
