"""/v1/schedules: a tenant's schedules, their next slots and the runs they fired so far.

The checks are agentq.commands.schedules' (tenant input: bad cron, zone, pace or catch-up
bound, a foreign agent or conversation is a 4xx and writes nothing); another tenant's
schedule is 404. Firing is the workers' (agentq.commands.firing), never the API's.
"""
from __future__ import annotations

from flask import Blueprint, g

from agentq.api.schedules import (
    ApprovalsOut,
    CatchUpOut,
    CreateSchedule,
    ListRuns,
    ListSchedules,
    OneSchedule,
    RunList,
    RunOut,
    ScheduleList,
    ScheduleOut,
)
from agentq.commands.schedules import NewSchedule, ScheduleCommands
from agentq.core.schedules import CatchUp
from agentq.core.timefmt import format_ts
from agentq.errors import InvalidInput
from agentq.store.schedules import ScheduleRecord, ScheduleRun
from agentq.web import present
from agentq.web.operation import operation
from agentq.web.services import services

bp = Blueprint("schedules", __name__, url_prefix="/v1/schedules")


@bp.post("")
@operation("Create a schedule: a cron expression in a time zone, or an interval",
           body=CreateSchedule, answers={201: ScheduleOut}, errors=(409,))
def create(body: CreateSchedule):
    record = _schedules().create(g.scope, NewSchedule(
        name=body.name, message=body.message, cron=body.cron, timezone=body.timezone,
        every_s=body.every_s, agent=body.agent, conversation_id=body.conversation_id,
        catch_up=CatchUp(body.catch_up.mode, body.catch_up.max_slots, body.catch_up.max_age_s),
        expire_after_s=_expire_after(body), paused=body.paused,
    ))
    return present.dump(_out(record, 10)), 201


@bp.get("")
@operation("List your schedules, each with its next slots", query=ListSchedules,
           answers={200: ScheduleList})
def listing(query: ListSchedules):
    found = _schedules().list_for(g.scope)
    return present.dump(ScheduleList(schedules=[_out(r, query.upcoming) for r in found]))


@bp.get("/<id:schedule_id>")
@operation("One schedule, with its next slots", query=OneSchedule, answers={200: ScheduleOut})
def one(schedule_id: str, query: OneSchedule):
    return present.dump(_out(_schedules().get(g.scope, schedule_id), query.upcoming))


@bp.post("/<id:schedule_id>/pause")
@operation("Pause a schedule: no slot fires until it is resumed", answers={200: ScheduleOut})
def pause(schedule_id: str):
    return present.dump(_out(_schedules().pause(g.scope, schedule_id), 10))


@bp.post("/<id:schedule_id>/resume")
@operation("Resume a schedule from its next slot after now (the paused ones are not caught up)",
           answers={200: ScheduleOut})
def resume(schedule_id: str):
    return present.dump(_out(_schedules().resume(g.scope, schedule_id), 10))


@bp.delete("/<id:schedule_id>")
@operation("Delete a schedule and the record of its runs; their conversations stay",
           answers={204: None})
def remove(schedule_id: str):
    _schedules().delete(g.scope, schedule_id)
    return "", 204


@bp.get("/<id:schedule_id>/runs")
@operation("The runs the schedule fired, the latest slot first, each with its conversation",
           query=ListRuns, answers={200: RunList})
def runs(schedule_id: str, query: ListRuns):
    found = _schedules().runs(g.scope, schedule_id, limit=query.limit)
    return present.dump(RunList(runs=[_run(r) for r in found]))


def _schedules() -> ScheduleCommands:
    return ScheduleCommands(services().commands)


def _expire_after(body: CreateSchedule) -> float | None:
    """The approvals rule as a number: None to wait; `expire` needs its seconds."""
    if body.approvals.mode == "wait":
        return None
    if body.approvals.expire_after_s is None:
        raise InvalidInput("approvals.mode 'expire' needs expire_after_s", code="invalid_schedule",
                           details=[{"loc": ["body", "approvals", "expire_after_s"],
                                     "msg": "required with mode 'expire'", "type": "missing"}])
    return body.approvals.expire_after_s


def _out(record: ScheduleRecord, upcoming: int) -> ScheduleOut:
    slots = _schedules().next_slots(record, upcoming) if upcoming else []
    return ScheduleOut(
        id=record.id, name=record.name, cron=record.cron, timezone=record.timezone,
        every_s=record.every_s, action=record.action,  # type: ignore[arg-type]
        agent=record.agent, conversation_id=record.conversation_id, message=record.message,
        catch_up=CatchUpOut(**record.catch_up), approvals=ApprovalsOut(**record.approvals),
        paused=record.paused, next_runs=[format_ts(s) for s in slots],
        created_at=format_ts(record.created_at), updated_at=format_ts(record.updated_at),
    )


def _run(run: ScheduleRun) -> RunOut:
    return RunOut(slot_at=format_ts(run.slot_at), status=run.status,  # type: ignore[arg-type]
                  conversation_id=run.conversation_id, message_id=run.message_id,
                  error=run.error, fired_at=None if run.fired_at is None else format_ts(run.fired_at),
                  attempts=run.attempts,
                  retry_at=None if run.retry_at is None else format_ts(run.retry_at))
