"""numba's ``njit`` with the package's caching rule (an identity decorator where numba is missing) and the compile
options of the steps."""

from __future__ import annotations

from typing import Any

__all__ = ["HAVE_NUMBA", "from_python", "njit", "trailing_zeros"]

try:  # numba is a core dependency; the import guard keeps the numpy backend usable without it
    from numba import njit as _numba_njit

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - exercised only where numba is missing
    HAVE_NUMBA = False
    _numba_njit = None


def njit(*args: Any, **options: Any) -> Any:
    """numba's ``njit`` with the package's one caching rule: ``cache=True`` is kept only for a function that
    Python can call, and dropped for one that only compiled code reaches: without Python wrappers
    (:data:`COMPILED_ONLY`) or inlined into its callers by numba (``inline="always"``). Nothing loads such a
    function from the on-disk cache (its callers' cached machine code holds it), while caching it cost every
    process that imports its module a cache locator per function (a test file written into the cache
    directory when it is decorated) and every cold start a cache save per function (docs/development.md,
    "issue-31zg2"). Without numba: an identity decorator (the numpy backend runs without it)."""
    if _numba_njit is None:  # pragma: no cover - exercised only where numba is missing
        return (lambda fn: fn) if not (len(args) == 1 and callable(args[0])) else args[0]
    compiled_only = options.get("no_cpython_wrapper") and options.get("no_cfunc_wrapper")
    if compiled_only or options.get("inline") == "always":
        options.pop("cache", None)
    if compiled_only and _LINKED_ONLY_PIPELINE is not None:
        options.setdefault("pipeline_class", _LINKED_ONLY_PIPELINE)
    return _numba_njit(*args, **options)


def from_python(step: Any) -> Any:
    """A Python-callable compile of the compiled-only (:data:`COMPILED_ONLY`) ``step``: the same function and
    compile options with numba's wrappers and library, compiled on its first call (so never at a start that
    does not call it): for the tests and for a look from Python. The kernels reach the step itself (issue-31zr2:
    a Python-callable step of the cold start's path compiles its wrappers, its own optimised module and its
    machine code, none of which the kernels that link it use)."""
    if _numba_njit is None:  # pragma: no cover - exercised only where numba is missing
        return step
    options = {k: v for k, v in step.targetoptions.items() if k not in COMPILED_ONLY and k != "nopython"}
    return _numba_njit(**options)(step.py_func)


#: the pipeline of a function only compiled code calls (:func:`njit` gives it to every ``COMPILED_ONLY`` one):
#: numba's own, with its code library replaced by a :class:`_LinkedOnlyLibrary`; ``None`` without numba or its internals
_LINKED_ONLY_PIPELINE: Any = None

#: the numba releases (major, minor) whose code-library internals :class:`_LinkedOnlyLibrary` was checked against
#: (it overrides two private methods of numba's ``JITCodeLibrary``); on any other release numba's own library is
#: used, which compiles the same code a little slower at a cold start (issue-31zj2). ``AINET_GYM_LINKED_ONLY=0``
#: turns it off on these too.
LINKED_ONLY_NUMBA = ((0, 68),)

try:  # numba's compiler internals, which may move between releases: if they have, numba's own library is used
    import os as _os

    import numba as _numba

    if tuple(int(v) for v in _numba.__version__.split(".")[:2]) not in LINKED_ONLY_NUMBA or _os.environ.get(
        "AINET_GYM_LINKED_ONLY", "1"
    ) in ("0", "false", "no"):
        raise ImportError(
            "linked-only code libraries are off for this numba release or by AINET_GYM_LINKED_ONLY"
        )
    import llvmlite.binding as _ll
    import llvmlite.ir as _llvmir
    from numba.core import cgutils as _cgutils
    from numba.core.codegen import JITCodeLibrary as _JITCodeLibrary
    from numba.core.compiler import CompilerBase as _CompilerBase
    from numba.core.compiler import DefaultPassBuilder as _DefaultPassBuilder
    from numba.core.compiler_machinery import LoweringPass as _LoweringPass
    from numba.core.compiler_machinery import register_pass as _register_pass
    from numba.core.typed_passes import AnnotateTypes as _AnnotateTypes

    _HAVE_INTERNALS = True
except ImportError:  # pragma: no cover - exercised only where numba is missing or has moved them
    _HAVE_INTERNALS = False

if _HAVE_INTERNALS:

    class _LinkedOnlyLibrary(_JITCodeLibrary):
        """The code library of a function only compiled code calls (``COMPILED_ONLY``): its module is only ever
        used linked into its callers' modules, where LLVM optimises it with them and makes their machine code.
        numba's library would also optimise it as a module of its own and make machine code for it that nothing
        calls (COMPILED_ONLY has no wrapper to call it through); this one does neither. numba's function passes
        (run when the module is added) are kept, so a caller links the function optimised as before the module
        passes, and the caller's module passes do the rest once. What it adds to numba's engine is only the
        environment pointers its module defines (``common`` globals that numba fills when the function is compiled
        and that a caller's linked copy resolves to), in a numba library of their own that holds no code
        (docs/development.md, issue-31zj2)."""

        def _optimize_final_module(self) -> None:
            """Nothing: the callers' module passes optimise the linked code."""

        def _finalize_final_module(self) -> None:
            self._finalize_dynamic_globals()
            self._verify_declare_only_symbols()
            env = _llvmir.Module(self.name + ".env")
            env.triple = _ll.get_process_triple()
            env.data_layout = str(self.codegen.target_data)
            for gv in self._final_module.global_variables:
                if gv.linkage == _ll.Linkage.common:
                    g = _llvmir.GlobalVariable(env, _cgutils.voidptr_t, name=gv.name)
                    g.linkage = "common"
                    g.initializer = _cgutils.get_null_value(g.type.pointee)
            self._env_library = self.codegen.create_library(self.name + ".env")  # numba's: into the engine
            self._env_library.add_ir_module(env)
            self._env_library.finalize()
            self._finalized = True

    @_register_pass(mutates_CFG=False, analysis_only=True)
    class _LinkedOnlyLibraryPass(_LoweringPass):
        """Gives the function a :class:`_LinkedOnlyLibrary` before numba lowers it (numba's lowering makes its
        own library only where the pipeline's state has none)."""

        _name = "ainet_linked_only_library"

        def __init__(self) -> None:
            _LoweringPass.__init__(self)

        def run_pass(self, state: Any) -> bool:
            if state.library is None:
                state.library = _LinkedOnlyLibrary(state.targetctx.codegen(), state.func_id.func_qualname)
                state.library.enable_object_caching()
            return False

    class _LinkedOnlyCompiler(_CompilerBase):
        """numba's nopython pipeline with :class:`_LinkedOnlyLibraryPass` before the lowering."""

        def define_pipelines(self) -> list[Any]:
            pm = _DefaultPassBuilder.define_nopython_pipeline(self.state)
            pm.add_pass_after(_LinkedOnlyLibraryPass, _AnnotateTypes)
            pm.finalize()
            return [pm]

    _LINKED_ONLY_PIPELINE = _LinkedOnlyCompiler


try:  # the count of trailing zero bits (llvm.cttz) from numba's internals, which may move between releases:
    # a missing one must not turn numba off (a separate guard) but fall back to a loop that compiles too
    from numba.cpython.unsafe.numbers import trailing_zeros
except ImportError:  # pragma: no cover - exercised only where numba is missing or has moved it

    @njit(cache=True, nogil=True)
    def trailing_zeros(x):  # type: ignore[no-redef]
        """The number of trailing zero bits of a non-zero unsigned integer ``x``."""
        n = 0
        while (x >> n) & 1 == 0:
            n += 1
        return n

# ----------------------------------------------------------------------------------------------------------
# the event loop's shared steps: both interval kernels (run_interval_numba and run_interval_lazy) are made of
# these and their own allocation and completion bookkeeping, with the same operations in the same order as
# when they were written into both loops (results bit for bit unchanged). They are compiled without numba's
# reference counting (``_nrt=False``: they allocate nothing): a compiled function increfs and decrefs every
# array it takes, atomically, which at every event was the threads' bottleneck (docs/performance-log.md,
# "Reference counts were the threads' bottleneck"); without it a call passes the arrays for free. Numba's
# own inlining (``inline="always"``) was tried: it copies each argument into a local of the caller, and
# those copies left 46 incref/decref pairs inside run_interval_numba's loops (none before; counted in its
# LLVM IR), where these calls leave none. A call takes at most 30 arguments (more compile to ``*args``).
# LLVM's own inlining is another thing: ``forceinline=True`` marks the compiled function ``alwaysinline``
# after numba has lowered it (no argument copies, no reference counts: the helper has none). LLVM left
# the three largest helpers as calls; inlined, ``parallel_rule`` and ``settle_units`` take 7% fewer
# instructions from run_interval_numba (its arguments no longer spilled and reloaded at every event), and
# ``add_link_bytes`` 3% more, so it stays a call (callgrind counts, docs/development.md, "Instructions per
# step").
# The steps only compiled code calls (all of them; the tests call ``settle_units`` and ``parallel_rule`` through
# :func:`from_python`, issue-31zr2) are compiled without the CPython and C-callable wrappers (``COMPILED_ONLY``): nothing calls them
# from Python, and their wrappers cost the cold start 0.66 s of CPU (docs/development.md, "the cold compile",
# issue-31zb); the callers' code is the same. Nor are they cached on their own (:func:`njit` drops their
# ``cache=True``): their callers' cached machine code holds them (issue-31zg2).
# The frame of an event is written once for both kernels (begin_event, end_event, below); every long kernel
# of this module is a short driver over such steps, each of one concern (issue-31ze): the steps that run at
# every event or round are ``_nrt=False``, ``forceinline=True`` and ``COMPILED_ONLY``, so the drivers'
# machine code is what it was when the steps were written inline (docs/development.md, "issue-31ze").
# ----------------------------------------------------------------------------------------------------------

#: the options of a step that only compiled code calls: no Python-callable wrappers to compile
COMPILED_ONLY: dict[str, bool] = {"no_cpython_wrapper": True, "no_cfunc_wrapper": True}
