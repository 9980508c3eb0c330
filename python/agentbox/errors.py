"""The exceptions of the agentbox client.

Every error the server answers is an APIError carrying its stable
``code`` (docs: serve/openapi.json, the Error schema), its ``message`` and
the HTTP ``status``; the common codes have subclasses to catch by name.
A server that cannot be reached, or that goes away in the middle of a
request, is ServerUnavailable (also a ConnectionError).
"""

__all__ = [
    "AgentboxError",
    "APIError",
    "Unauthorized",
    "NotFound",
    "InvalidJSON",
    "InvalidAction",
    "InvalidRequest",
    "UnknownApp",
    "TooManyEnvironments",
    "Busy",
    "EpisodeEnded",
    "AppStartFailed",
    "ForkDiverged",
    "ShuttingDown",
    "ServerUnavailable",
    "Timeout",
    "ProtocolError",
    "NotAgentbox",
    "api_error",
]


class AgentboxError(Exception):
    """Every exception the client raises on purpose."""


class APIError(AgentboxError):
    """An error the server answered: ``code`` (stable, e.g.
    ``invalid_action``), ``message``, ``status`` (the HTTP status), and for
    some codes ``end`` (how the episode ended) and ``trace`` (the trace
    directory of an episode that failed to start)."""

    def __init__(self, code, message, status=0, end=None, trace=None, step=None):
        self.code = code
        self.message = message
        self.status = status
        self.end = end
        self.trace = trace
        #: fork_diverged: the first step whose screen differed.
        self.step = step
        super().__init__("%s (%d): %s" % (code, status, message))

    @classmethod
    def from_json(cls, err, status=0):
        return api_error(err.get("code") or "internal", err.get("message") or "", err.get("status") or status,
                         err.get("end"), err.get("trace"), err.get("step"))


class Unauthorized(APIError):
    """401 unauthorized: no token, or one the server does not accept."""


class NotFound(APIError):
    """404 not_found: no such environment, upload or route for this token."""


class InvalidJSON(APIError):
    """400 invalid_json: the request is not the JSON the API wants."""


class InvalidAction(APIError):
    """400 invalid_action: not an action of docs/actions.md's vocabulary.
    (An action that parses but fails validation, a click off the screen, is
    not an error: the step's info says ``invalid``.)"""


class InvalidRequest(APIError):
    """422 invalid_request: a value out of range, a missing field."""


class UnknownApp(APIError):
    """422 unknown_app: no app of that name is registered on the server."""


class TooManyEnvironments(APIError):
    """429 too_many_environments: the token holds all the environments it may."""


class Busy(APIError):
    """409 busy: the environment is starting or being reset."""


class EpisodeEnded(APIError):
    """409 episode_ended: the episode has ended (``end`` says how); reset
    for another, or close."""


class AppStartFailed(APIError):
    """422 app_start: the app did not start (``trace`` has its output)."""


class ForkDiverged(APIError):
    """422 fork_diverged: a fork's replayed screen did not match its
    parent's; ``step`` is the first step that differed, ``trace`` the
    fork's trace. No fork was kept."""


class ShuttingDown(APIError):
    """503 shutting_down: the server is stopping."""


_BY_CODE = {
    "unauthorized": Unauthorized,
    "not_found": NotFound,
    "invalid_json": InvalidJSON,
    "invalid_action": InvalidAction,
    "invalid_request": InvalidRequest,
    "unknown_app": UnknownApp,
    "too_many_environments": TooManyEnvironments,
    "busy": Busy,
    "episode_ended": EpisodeEnded,
    "app_start": AppStartFailed,
    "fork_diverged": ForkDiverged,
    "shutting_down": ShuttingDown,
}


def api_error(code, message, status=0, end=None, trace=None, step=None):
    """The APIError (subclass) of a code."""
    return _BY_CODE.get(code, APIError)(code, message, status, end, trace, step)


class ServerUnavailable(AgentboxError, ConnectionError):
    """The server cannot be reached, or the connection to it broke or was
    closed by it (``close_code``: the WebSocket's close code, when it sent
    one). A request that was under way may or may not have run."""

    def __init__(self, message, close_code=None):
        self.close_code = close_code
        super().__init__(message)


class Timeout(AgentboxError, TimeoutError):
    """The server did not answer within the client's timeout; the
    connection is dropped (the request may or may not have run)."""


class ProtocolError(AgentboxError):
    """The server's answer is not what the API says."""


class NotAgentbox(ProtocolError):
    """The URL answers, but not as an agentbox server: an HTTP error without
    the API's error (another server, a proxy, a wrong port or path);
    ``status`` is its HTTP status."""

    def __init__(self, message, status=0):
        self.status = status
        super().__init__(message)
