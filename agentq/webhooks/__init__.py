"""Webhooks: tenants' endpoints told of what happens in their conversations (docs/webhooks.md).

`addresses` keeps a tenant's URL from reaching what the operator did not offer, `sender`
posts one signed request, `payloads` says what a delivery tells, `endpoints` is what a
tenant may do to its endpoints, `delivery` moves the outbox (agentq.store.webhooks).
"""
