"""/v1/profiles: the operator's model profiles a tenant may use, and the tenant's own keys.

A key is write-only: `PUT …/key` stores it sealed and answers 204, `DELETE …/key` forgets
it; no answer, log line or error ever carries it (the body's validation errors drop their
input). A profile closed to the caller's tenant is 404, as if it did not exist.
"""
from __future__ import annotations

from flask import Blueprint, g

from agentq.api.profiles import ProfileList, ProfileOut, PutKey
from agentq.errors import NotFound
from agentq.tenancy.own_keys import OwnKeys
from agentq.web import present
from agentq.web.errors import ApiError
from agentq.web.operation import operation
from agentq.web.services import services

bp = Blueprint("profiles", __name__, url_prefix="/v1/profiles")


@bp.get("")
@operation("List the model profiles you may use", answers={200: ProfileList})
def listing():
    svc = services()
    tenant = g.scope.tenant
    own = svc.own_keys.profiles_with_keys(tenant) if svc.own_keys is not None else set()
    return present.dump(ProfileList(profiles=[
        ProfileOut(
            name=p.name, kind=p.kind, models=list(p.models), default_model=p.chosen_model,
            tenant_keys=p.tenant_keys, own_key_set=p.name in own, extra_body=list(p.extra_body),
        )
        for p in svc.policy.profiles_for(tenant)
    ]))


@bp.put("/<id:profile>/key")
@operation("Set your own API key for a profile that takes one (write-only)",
           body=PutKey, answers={204: None}, errors=(409, 503))
def put_key(profile: str, body: PutKey):
    _own_keys().put(g.scope.tenant, profile, body.api_key)
    return "", 204


@bp.delete("/<id:profile>/key")
@operation("Forget your own API key for a profile", answers={204: None})
def delete_key(profile: str):
    if not _own_keys().delete(g.scope.tenant, profile):
        raise NotFound(f"no key of yours is set for profile {profile}")
    return "", 204


def _own_keys() -> OwnKeys:
    own_keys = services().own_keys
    if own_keys is None:
        raise ApiError(503, "own_keys_unavailable", "this API stores no tenant keys")
    return own_keys
