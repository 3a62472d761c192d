"""Who may call what: the operator's policy and profiles, tenants' own keys, the keybox that seals them, and the access that picks a call's endpoint and key."""
