"""The tool registry: ``@tool`` functions with pydantic argument models, looked up by name.

A tool is a plain function ``fn(args: ArgsModel, ctx: ToolContext) -> JSON value``.
Modules listed in settings.BALLAST_TOOL_MODULES (the built-ins and
BALLAST_EXTRA_TOOL_MODULES) are imported on the first lookup, and their ``@tool``
decorators register the functions; a web or worker process does not import them as
Django starts, but the system check of runs.tools.checks, which ``manage.py`` commands
run at start, imports them all and names a module that fails. The tools of MCP servers
added in the app (``mcp__<server>__<tool>``, runs.tools.mcp_servers) are found by
:func:`get_tool` too.
"""

from __future__ import annotations

import importlib
import inspect
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, get_type_hints, overload

from django.conf import settings
from pydantic import BaseModel, ValidationError

from core import tracing
from core.fields import field_path
from runs.sandbox import values
from runs.vocabulary import CancelEvent, NodeError, StepCancelled

if TYPE_CHECKING:
    # For a type only: tools read a step's context; they stand below the node kinds, which call them.
    from runs.nodes.base import NodeContext

F = TypeVar("F", bound=Callable[..., Any])


class UnknownTool(KeyError):
    """No tool is registered under that name (after importing BALLAST_TOOL_MODULES)."""


class ToolModuleError(ImportError):
    """A module of BALLAST_TOOL_MODULES failed to import: it does not exist, raised while
    importing, or one of its ``@tool`` registrations was refused (a first parameter that
    is not a pydantic model, a name another function took). ``module`` names it; the
    original exception is ``__cause__``."""

    def __init__(self, module: str, cause: BaseException):
        self.module = module
        super().__init__(
            f"tool module {module!r} (BALLAST_TOOL_MODULES, BALLAST_EXTRA_TOOL_MODULES) failed to import: "
            f"{type(cause).__name__}: {cause}",
            name=module,
        )


@dataclass(frozen=True)
class ToolContext:
    """What a tool may know about the step calling it.

    - ``idempotency_key``: the same on every attempt of the step; send it to the external
      system (Idempotency-Key header, Message-ID) so a repeated call is recognised.
    - ``timeout``: seconds left for the step (None = no limit); tools bound their own
      network waits by it.
    - ``cancelled``: the step's cancel signal (``NodeContext.cancel_event``), set when
      the run is cancelled, the step's lease is lost (its heartbeat failed: another
      worker may own it now) or its ``timeout_seconds`` ran out. A long tool waits on it
      (``ctx.cancelled.wait(seconds)`` instead of ``time.sleep``) or calls
      :meth:`check_cancelled` between pieces of work, and stops; whatever it returns
      after that is not stored for a run that ended. A context made by hand gets an
      event of its own that nothing sets.
    """

    idempotency_key: str
    run_id: int | None = None
    step_id: int | None = None
    node_id: str = ""
    attempt: int = 1
    timeout: float | None = None
    cancelled: threading.Event = field(default_factory=CancelEvent, compare=False, repr=False)

    @classmethod
    def for_step(cls, ctx: NodeContext) -> ToolContext:
        """The context of a tool called by a step (a ``tool`` node, or an agent's tool-call
        child step): that step's idempotency key, ids and attempt, its time left as
        ``timeout`` (None when the step has no deadline) and its cancel event as
        ``cancelled`` (the same object: set for the node, seen by the tool)."""
        return cls(
            ctx.idempotency_key,
            ctx.run_id,
            ctx.step_id,
            ctx.node_id,
            ctx.attempt,
            timeout=ctx.time_left(),
            cancelled=ctx.cancel_event,
        )

    def check_cancelled(self) -> None:
        """Raise :class:`StepCancelled` (code ``cancelled``, not retryable: the error the
        node kinds raise) if the step's cancel signal is set; else return."""
        if self.cancelled.is_set():
            raise StepCancelled()


@dataclass(frozen=True)
class RegisteredTool:
    """A registered tool.

    ``repeat_safe`` False means calling it twice may act twice (an email, a payment):
    recovery then asks a person instead of re-running a step interrupted by a crash.
    """

    name: str
    description: str
    args_model: type[BaseModel]
    fn: Callable[[BaseModel, ToolContext], Any]
    repeat_safe: bool = True

    def json_schema(self) -> dict[str, Any]:
        """JSON Schema of the arguments object (what an LLM or the builder is shown)."""
        return self.args_model.model_json_schema()

    def validate_args(self, raw: Mapping[str, Any]) -> BaseModel:
        """Parse ``raw`` into the args model.

        Raises NodeError(code="tool_arguments", retryable=False) whose ``details`` is
        ``{"errors": [{"field": "a.b[0]", "message": ..., "type": ...}]}``.
        """
        try:
            return self.args_model.model_validate(dict(raw))
        except ValidationError as exc:
            errors = field_errors(exc)
            summary = "; ".join(f"{e['field'] or '(arguments)'}: {e['message']}" for e in errors)
            raise NodeError(
                f"invalid arguments for tool {self.name!r}: {summary}",
                code="tool_arguments",
                retryable=False,
                details={"errors": errors},
            ) from exc

    def argument_problems(self, raw: Mapping[str, Any]) -> list[tuple[tuple[Any, ...], str]]:
        """``(location, message)`` per way ``raw`` breaks the arguments model (empty when
        it fits); validation reads these to name a node's fields."""
        try:
            self.args_model.model_validate(dict(raw))
        except ValidationError as exc:
            return [(tuple(e["loc"]), e["msg"]) for e in exc.errors(include_url=False)]
        return []

    def call(self, raw_args: Mapping[str, Any], ctx: ToolContext) -> Any:
        """Validate ``raw_args``, run the tool and return its result as plain JSON data.

        Raises NodeError: ``tool_arguments`` (invalid arguments), whatever NodeError the
        tool raises, ``invalid_output`` when the result is not JSON (see ``_to_json``), and
        ``tool_error`` (retryable) for any other exception from the tool.
        """
        # A span of the step attempt's trace when traces are on (core.tracing; GenAI's
        # execute_tool operation): the failure's error code is its error.type.
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": self.name, "ballast.tool.repeat_safe": self.repeat_safe}
        with tracing.span(f"execute_tool {self.name}", attributes=attributes) as span:
            try:
                args = self.validate_args(raw_args)
                try:
                    result = self.fn(args, ctx)
                except NodeError:
                    raise
                except Exception as exc:  # a tool's bug or an unclassified failure
                    raise NodeError(f"tool {self.name!r} failed: {type(exc).__name__}: {exc}", code="tool_error") from exc
                return _to_json(self.name, result)
            except NodeError as exc:
                tracing.set_error(span, exc.code, str(exc))
                raise


# name -> tool. Written at import time of tool modules (under the import lock) and by
# _load_modules (under _lock); read freely.
_REGISTRY: dict[str, RegisteredTool] = {}
_loaded_modules: set[str] = set()
_lock = threading.Lock()


@overload
def tool(fn: F, /) -> F: ...
@overload
def tool(name: str | None = None, *, description: str = "", repeat_safe: bool = True) -> Callable[[F], F]: ...


def tool(name: Any = None, *, description: str = "", repeat_safe: bool = True) -> Any:
    """Register a function as a tool; usable as ``@tool`` or ``@tool("name", ...)``.

    - ``name``: registry name (default: the function's name).
    - ``description``: shown to models and in the builder (default: the docstring).
    - ``repeat_safe``: whether running it twice is harmless (see RegisteredTool).

    The arguments model is the annotation of the function's first parameter, which must
    be a pydantic BaseModel subclass (TypeError otherwise). Registering a different
    function under a taken name raises ValueError. Returns the function unchanged.
    """

    def register(fn: F) -> F:
        tool_name = name if isinstance(name, str) else fn.__name__
        registered = RegisteredTool(
            name=tool_name,
            description=description or inspect.cleandoc(fn.__doc__ or ""),
            args_model=_args_model(fn),
            fn=fn,
            repeat_safe=repeat_safe,
        )
        existing = _REGISTRY.get(tool_name)
        if existing is not None and _qualified(existing.fn) != _qualified(fn):
            raise ValueError(f"tool {tool_name!r} is already registered by {_qualified(existing.fn)}")
        # Same qualified name: the module was reloaded; the newer function wins.
        _REGISTRY[tool_name] = registered
        return fn

    if callable(name):  # bare @tool
        fn, name = name, None
        return register(fn)
    return register


def get_tool(name: str) -> RegisteredTool:
    """The tool registered as ``name``, or the MCP server tool so named
    (``mcp__<server>__<tool>``: a query of that server's stored tool list, see
    runs.tools.mcp_servers). Raises UnknownTool."""
    _load_modules()
    registered = _REGISTRY.get(name)
    if registered is not None:
        return registered
    if name.startswith("mcp__"):
        # Function-level: the MCP package imports this one (its tools are RegisteredTools).
        from runs.tools.mcp_servers import find_tool

        found = find_tool(name)
        if found is not None:
            return found
    raise UnknownTool(name)


def require_tool(name: str) -> RegisteredTool:
    """The tool registered as ``name``, for a step about to call it. Raises
    NodeError(code="unknown_tool", not retryable: the same name fails every time)."""
    try:
        return get_tool(name)
    except UnknownTool:
        raise NodeError(f"unknown tool {name!r}", code="unknown_tool", retryable=False) from None


def all_tools() -> dict[str, RegisteredTool]:
    """Every registered tool, by name, sorted by name (not the MCP servers' tools, which
    live in the database: runs.tools.mcp_servers.all_mcp_tools)."""
    _load_modules()
    return dict(sorted(_REGISTRY.items()))


def field_errors(exc: ValidationError) -> list[dict[str, str]]:
    """Pydantic errors as ``[{"field": "items[0].sku", "message": ..., "type": ...}]``
    (paths in the ``core.fields.field_path`` style)."""
    return [{"field": field_path(e["loc"]), "message": e["msg"], "type": e["type"]} for e in exc.errors(include_url=False)]


def import_tool_module(module: str) -> None:
    """Import the tool module ``module`` (a dotted name) once, registering its tools.

    Raises ToolModuleError naming ``module`` for anything raised while importing it:
    ModuleNotFoundError, an error in its code, a refused ``@tool`` registration. A module
    that failed is tried again on the next call (Python keeps no half-imported module)."""
    if module in _loaded_modules:
        return
    with _lock:
        if module in _loaded_modules:
            return
        try:
            importlib.import_module(module)
        except Exception as exc:
            raise ToolModuleError(module, exc) from exc
        _loaded_modules.add(module)


def _load_modules() -> None:
    # Compared against the setting on every lookup (cheap) so that a module added by a
    # test's settings override is imported too. Raises ToolModuleError naming the module.
    for module in settings.BALLAST_TOOL_MODULES:
        if module not in _loaded_modules:
            import_tool_module(module)


def _args_model(fn: Callable[..., Any]) -> type[BaseModel]:
    params = list(inspect.signature(fn).parameters.values())
    if len(params) < 2:
        raise TypeError(f"tool {fn.__qualname__} must take (args: SomeModel, ctx: ToolContext)")
    model = params[0].annotation
    if isinstance(model, str):  # postponed annotations: resolve in the function's module
        try:
            model = get_type_hints(fn).get(params[0].name)
        except NameError as exc:
            raise TypeError(f"tool {fn.__qualname__}: cannot resolve the args annotation: {exc}") from exc
    if not (inspect.isclass(model) and issubclass(model, BaseModel)):
        raise TypeError(f"tool {fn.__qualname__}: first parameter must be annotated with a pydantic model")
    return model


def _qualified(fn: Callable[..., Any]) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"


def _dump_model(value: Any) -> Any:
    # Explicitly in JSON mode: pydantic itself turns Decimal, datetime and UUID fields into
    # their JSON text, as the model's schema (what models and the builder see) says.
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


def _to_json(name: str, result: Any) -> Any:
    """A tool result as plain JSON data: pydantic models (anywhere in it) dumped in JSON
    mode, tuples as lists; any other value JSON cannot carry faithfully (NaN, a set, bytes,
    a Decimal or datetime outside a model, a non-string key, a NUL character) fails the
    step at once with ``invalid_output`` naming where (``output.items[2].price``), before
    anything is stored: nothing is silently turned into something else."""
    try:
        return values.check(result, "output", convert=_dump_model).value
    except values.InvalidValue as exc:
        raise NodeError(
            f"tool {name!r} returned a value that cannot be stored: {exc.path}: {exc.reason}",
            code="invalid_output",
            retryable=False,
            details=exc.as_dict(),
        ) from None
