"""agentbox: disposable, isolated Linux desktops for agents, driven from
Python through ``agentbox serve`` (API v1).

::

    import agentbox

    with agentbox.make("mover") as env:          # AGENTBOX_URL, AGENTBOX_TOKEN
        obs, info = env.reset()                   # obs: H×W×3 uint8 (NumPy), or RGB bytes
        obs, reward, terminated, truncated, info = env.step({"action": "key_down", "key": "Right"})

Standard library only; NumPy is used when it is installed.
"""

from .client import DEFAULT_URL, OBSERVATIONS, Client, Env, default_token_file, have_numpy, make
from .errors import (
    AgentboxError,
    APIError,
    AppStartFailed,
    Busy,
    EpisodeEnded,
    ForkDiverged,
    InvalidAction,
    InvalidJSON,
    InvalidRequest,
    NotAgentbox,
    NotFound,
    ProtocolError,
    ServerUnavailable,
    ShuttingDown,
    Timeout,
    TooManyEnvironments,
    Unauthorized,
    UnknownApp,
)

__version__ = "0.1.0"

__all__ = [
    "Client",
    "Env",
    "ForkDiverged",
    "make",
    "DEFAULT_URL",
    "OBSERVATIONS",
    "default_token_file",
    "have_numpy",
    "AgentboxError",
    "APIError",
    "AppStartFailed",
    "Busy",
    "EpisodeEnded",
    "InvalidAction",
    "InvalidJSON",
    "InvalidRequest",
    "NotAgentbox",
    "NotFound",
    "ProtocolError",
    "ServerUnavailable",
    "ShuttingDown",
    "Timeout",
    "TooManyEnvironments",
    "Unauthorized",
    "UnknownApp",
]
