"""Who may call what: the operator's policy and profiles, and tenants' own provider keys.

Also the keybox that seals those keys at rest, and the access that picks the endpoint
and key of each model call.
"""
