"""The compiled records (numba ``structref``) of :mod:`ainet_gym.sim.records`' fields."""

from __future__ import annotations

from typing import Any

import numpy as np

from ainet_gym.sim.records import MERGE_FIELDS, OUTPUTS_FIELDS, STATE_FIELDS, STRUCTURE_FIELDS

__all__ = ["HAVE_STRUCTREF", "compiled_record", "outputs_record"]

try:  # the compiled records (numba is a core dependency; without it only the numpy backend runs)
    from numba.core import types as _types
    from numba.experimental import structref as _structref

    HAVE_STRUCTREF = True
except ImportError:  # pragma: no cover - exercised only where numba is missing
    HAVE_STRUCTREF = False

if HAVE_STRUCTREF:

    class _RecordType(_types.StructRef):
        """A record's numba type: its fields typed without literal values (one type however it was built)."""

        def preprocess_fields(self, fields: Any) -> tuple:
            return tuple((n, _types.unliteral(t)) for n, t in fields)

    @_structref.register
    class StructureType(_RecordType):
        """The numba type of a compiled :class:`IntervalStructure`."""

    @_structref.register
    class StateType(_RecordType):
        """The numba type of a compiled state record (:data:`STATE_FIELDS`)."""

    @_structref.register
    class OutputsType(_RecordType):
        """The numba type of a compiled :class:`IntervalOutputs`."""

    @_structref.register
    class MergeType(_RecordType):
        """The numba type of a compiled :class:`MergeTable`."""

    class StructureRecord(_structref.StructRefProxy):
        """A compiled :class:`IntervalStructure` (its fields readable from Python, slowly)."""

    class StateRecord(_structref.StructRefProxy):
        """A compiled state record (:data:`STATE_FIELDS`)."""

    class OutputsRecord(_structref.StructRefProxy):
        """A compiled :class:`IntervalOutputs`."""

    class MergeRecord(_structref.StructRefProxy):
        """A compiled :class:`MergeTable`."""

    _structref.define_proxy(StructureRecord, StructureType, list(STRUCTURE_FIELDS))
    _structref.define_proxy(StateRecord, StateType, list(STATE_FIELDS))
    _structref.define_proxy(OutputsRecord, OutputsType, list(OUTPUTS_FIELDS))
    _structref.define_proxy(MergeRecord, MergeType, list(MERGE_FIELDS))

    from numba.core import cgutils as _cgutils
    from numba.core.extending import intrinsic as _intrinsic
    from numba.experimental.jitclass.base import imp_dtor as _imp_dtor

    from ainet_gym.sim.backends.numba.jit import njit

    def _fill_codegen(inst_type: Any, fields: tuple[str, ...]) -> Any:
        """The code of :func:`_inline_constructor`'s intrinsic: ``structref.new``'s allocation (a zeroed
        payload with the record's destructor), then each field stored with a new reference, in order."""

        def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
            data_type = inst_type.get_data_type()
            alloc_type = context.data_model_manager[data_type].get_value_type()
            size = context.get_constant(_types.uintp, context.get_abi_sizeof(alloc_type))
            meminfo = context.nrt.meminfo_alloc_dtor(
                builder, size, _imp_dtor(context, builder.module, inst_type)
            )
            ptr = builder.bitcast(context.nrt.meminfo_data(builder, meminfo), alloc_type.as_pointer())
            builder.store(_cgutils.get_null_value(alloc_type), ptr)
            data = _cgutils.create_struct_proxy(data_type)(context, builder, ref=ptr)
            for name, ty, val in zip(fields, sig.args, args, strict=True):
                value = context.cast(builder, val, ty, inst_type.field_dict[name])
                context.nrt.incref(builder, inst_type.field_dict[name], value)
                setattr(data, name, value)
            # the record's value: its model's one member, the meminfo (what ``structref.new`` returns)
            return builder.insert_value(
                _cgutils.get_null_value(context.get_value_type(inst_type)), meminfo, 0
            )

        return codegen

    def _inline_constructor(type_class: type, fields: tuple[str, ...]) -> Any:
        """A constructor of ``type_class``'s records from its ``fields`` in order, for compiled code only: a
        numba intrinsic, so its code is made where it is called. ``define_proxy``'s constructor
        (``ctor.<locals>.impl``) is a function of its own that numba compiles with its own optimised module
        and machine code, 0.4-0.6 s of CPU for the four records at a cold start (issue-31zr2); this one stores
        the same fields into the same allocation (``structref.new``'s code, :func:`_fill_codegen`). Made with
        the fields' names as its parameters (numba types an intrinsic by its signature), by ``exec``, as
        numba's own ``structref.define_constructor`` is."""
        params = ", ".join(fields)
        source = f"""
def make(typingctx, {params}):
    inst_type = type_class(list(zip(fields, [{params}])))
    return inst_type({params}), fill_codegen(inst_type, fields)
"""
        names: dict[str, Any] = {
            "type_class": type_class,
            "fields": tuple(fields),
            "fill_codegen": _fill_codegen,
        }
        exec(source, names)  # generated from the records' own field names
        return _intrinsic(names["make"])

    _make_structure = _inline_constructor(StructureType, STRUCTURE_FIELDS)
    _make_state = _inline_constructor(StateType, STATE_FIELDS)
    _make_outputs = _inline_constructor(OutputsType, OUTPUTS_FIELDS)
    _make_merge = _inline_constructor(MergeType, MERGE_FIELDS)

    # the constructors, compiled and cached on disk like the kernels (define_proxy's own are compiled anew
    # in every process); each builds its record by an inlined constructor (:func:`_inline_constructor`)
    @njit(cache=True)
    def _new_structure(
        inst_seg, ent_hi, ex_lo, fe_lo, fe_hi, e_flow, e_link, e_coef, inst_unit, inst_flow, unit_alive,
        unit_bg, unit_nphases, unit_compute, unit_overlap, phase_off, phase_latency, phase_flow_lo,
        phase_flow_n, inst_phase, phase_npred, phase_succ_off, phase_succ, flow_unit, flow_phase, flow_bg,
        flow_scale, flow_demand,
    ):  # fmt: skip  # pragma: no cover - compiled
        return _make_structure(
            inst_seg, ent_hi, ex_lo, fe_lo, fe_hi, e_flow, e_link, e_coef, inst_unit, inst_flow, unit_alive,
            unit_bg, unit_nphases, unit_compute, unit_overlap, phase_off, phase_latency, phase_flow_lo,
            phase_flow_n, inst_phase, phase_npred, phase_succ_off, phase_succ, flow_unit, flow_phase, flow_bg,
            flow_scale, flow_demand,
        )  # fmt: skip

    @njit(cache=True)
    def _new_state(
        flow_bytes, capacity, rem, phase_cur, t_start_left, t_compute_left, t_comm_start_left, phase_state,
        phase_wait, phase_lat_left, iter_start, comm_start, comm_end, iterations_total, last_step_s,
        last_comm_s, bg_on, time_s,
    ):  # fmt: skip  # pragma: no cover - compiled
        return _make_state(
            flow_bytes, capacity, rem, phase_cur, t_start_left, t_compute_left, t_comm_start_left,
            phase_state, phase_wait, phase_lat_left, iter_start, comm_start, comm_end, iterations_total,
            last_step_s, last_comm_s, bg_on, time_s,
        )  # fmt: skip

    @njit(cache=True)
    def _new_outputs(iters, step_sum, comm_sum, compute_t, active_t, link_bytes, stalled):  # pragma: no cover
        return _make_outputs(iters, step_sum, comm_sum, compute_t, active_t, link_bytes, stalled)

    @njit(cache=True)
    def _new_merge(
        seg_cand, cand_gather, seg_flow, seg_link, inst_seg, seg_coef, e_flow, e_link, e_coef, ent_hi, seg_row,
        inst_conn, conn_npaths, rowsum, seg_excl, ex_lo, fe_lo, fe_hi, inst_flow,
    ):  # fmt: skip  # pragma: no cover - compiled
        return _make_merge(
            seg_cand, cand_gather, seg_flow, seg_link, inst_seg, seg_coef, e_flow, e_link, e_coef, ent_hi, seg_row,
            inst_conn, conn_npaths, rowsum, seg_excl, ex_lo, fe_lo, fe_hi, inst_flow,
        )  # fmt: skip

    _NEW = {"structure": _new_structure, "state": _new_state, "outputs": _new_outputs, "merge": _new_merge}
    _FIELDS = {
        "structure": STRUCTURE_FIELDS,
        "state": STATE_FIELDS,
        "outputs": OUTPUTS_FIELDS,
        "merge": MERGE_FIELDS,
    }


def compiled_record(kind: str, values: dict[str, np.ndarray] | tuple) -> object:
    """The compiled record ``kind`` (``"structure"``, ``"state"``, ``"outputs"`` or ``"merge"``) of ``values``: a
    NamedTuple of this module (or any tuple in its field order) or a dict by field name."""
    if not HAVE_STRUCTREF:  # pragma: no cover
        raise RuntimeError("compiled records need numba")
    if kind not in _NEW:
        raise ValueError(f"kind = {kind!r}: allowed: {', '.join(_NEW)}")
    names = _FIELDS[kind]
    if isinstance(values, dict):
        missing = [n for n in names if n not in values]
        if missing or len(values) != len(names):
            raise ValueError(f"{kind} record: fields {sorted(values)}; expected exactly {list(names)}")
        values = tuple(values[n] for n in names)
    if len(values) != len(names):
        raise ValueError(f"{kind} record: {len(values)} values; expected {len(names)} ({list(names)})")
    return _NEW[kind](*values)


def outputs_record(
    iters: np.ndarray,
    step_sum: np.ndarray,
    comm_sum: np.ndarray,
    compute_t: np.ndarray,
    active_t: np.ndarray,
    link_bytes: np.ndarray,
    stalled: np.ndarray,
) -> object:
    """The compiled :class:`IntervalOutputs` of these arrays, in its field order, without
    :func:`compiled_record`'s checks of the fields (a call per interval: the record holds the interval's new
    :class:`~ainet_gym.sim.engine.IntervalMetrics` arrays)."""
    if not HAVE_STRUCTREF:  # pragma: no cover
        raise RuntimeError("compiled records need numba")
    return _new_outputs(iters, step_sum, comm_sum, compute_t, active_t, link_bytes, stalled)
