"""/v1/agents: a tenant's agents (create, publish a version, read) and those the operator offers it.

Versions are immutable: there is no PUT and no DELETE. An agent of another tenant, or
one defined in code that the policy does not offer the caller, is 404 as if it did
not exist.
"""
from __future__ import annotations

import re

from flask import Blueprint, g, url_for
from pydantic import ValidationError

from agentq.api.agents import (
    AgentList,
    AgentOut,
    AgentVersionPage,
    CreateAgent,
    ListAgents,
    ListAgentVersions,
    NewAgentVersion,
)
from agentq.commands.agents import AgentCommands
from agentq.core.agents import NAME_PATTERN, AgentDefinition
from agentq.errors import InvalidInput, NotFound
from agentq.web import present
from agentq.web.errors import validation_details
from agentq.web.operation import operation
from agentq.web.pagination import page_of
from agentq.web.services import services

bp = Blueprint("agents", __name__, url_prefix="/v1/agents")


@bp.post("")
@operation("Create an agent: version 1 of its definition", body=CreateAgent,
           answers={201: AgentOut}, errors=(409,))
def create(body: CreateAgent):
    created = _agents().create_agent(g.scope, _definition(body.name, body))
    location = url_for("agents.read_version", name=created.name, version=created.version)
    return present.agent(created), 201, {"Location": location}


@bp.get("")
@operation("List the agents you may use: yours and the operator's, latest version each, by name",
           query=ListAgents, answers={200: AgentList})
def listing(query: ListAgents):
    page = page_of(lambda limit: _agents().agents(g.scope, after_name=query.cursor, limit=limit),
                   query.limit, lambda version: version.name)
    return {"agents": [present.agent(version) for version in page.rows],
            "next_cursor": page.next_cursor}


@bp.get("/<id:name>")
@operation("Read an agent's latest version", answers={200: AgentOut})
def read(name: str):
    return present.agent(_agents().agent(g.scope, _name(name)))


@bp.post("/<id:name>/versions")
@operation("Publish a new, immutable version of one of your agents", body=NewAgentVersion,
           answers={201: AgentOut}, errors=(409,))
def publish(name: str, body: NewAgentVersion):
    added = _agents().add_version(g.scope, _definition(_name(name), body))
    location = url_for("agents.read_version", name=added.name, version=added.version)
    return present.agent(added), 201, {"Location": location}


@bp.get("/<id:name>/versions")
@operation("List the versions of an agent, oldest first, a page at a time",
           query=ListAgentVersions, answers={200: AgentVersionPage})
def versions(name: str, query: ListAgentVersions):
    agents, name = _agents(), _name(name)
    page = page_of(lambda limit: agents.versions(g.scope, name, after_version=query.cursor or 0,
                                                 limit=limit),
                   query.limit, lambda version: version.version)
    return {"versions": [present.agent(version) for version in page.rows],
            "next_cursor": page.next_cursor}


@bp.get("/<id:name>/versions/<int(min=1, max=2147483647):version>")
@operation("Read one version of an agent", answers={200: AgentOut})
def read_version(name: str, version: int):
    return present.agent(_agents().agent(g.scope, _name(name), version=version))


def _agents() -> AgentCommands:
    return AgentCommands(services().commands)


def _name(name: str) -> str:
    """A name from the path; one no agent can have is no agent."""
    if not re.match(NAME_PATTERN, name):
        raise NotFound(f"no agent {name}")
    return name


def _definition(name: str, body: CreateAgent | NewAgentVersion) -> AgentDefinition:
    try:
        definition = AgentDefinition(name=name, description=body.description,
                                     settings=body.settings, overridable=tuple(body.overridable))
    except ValidationError as exc:  # the body's model checked the same: kept for safety
        raise InvalidInput("the agent's definition is not valid", code="invalid_agent",
                           details=validation_details(exc)) from None
    try:
        return definition.checked_size()
    except ValueError as exc:
        raise InvalidInput(str(exc), code="invalid_agent") from None
