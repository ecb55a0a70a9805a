"""mentor as an LTI 1.3 tool: a learning management system launches the box for a module, signed in.

The flow, in the order a launch takes it (each step one module):

    claims.py        the 1EdTech claim names, message types and roles mentor reads
    errors.py        LtiRefused: a 4xx status, a reason for the log line, a sentence for the page
    keys.py          the tool's RSA key (configured, or generated once in the data directory) and its JWKS
    tables.py        the registrations table (issuer, client id, endpoints, deployment ids)
    registrations.py the only reader and writer of that table
    platform_keys.py each platform's JWKS, fetched and cached (cached keys keep working when it cannot be fetched)
    nonces.py        nonces used once, in the learner state store (memory, or Redis shared by replicas)
    state.py         the OIDC `state`: a short-lived HMAC-signed token, so no cookie is needed in the LMS's iframe
    launch.py        login initiation and the id_token's validation -> a `Launch`
    deep_linking.py  the picker's signed session and the signed LtiDeepLinkingResponse
    registration.py  LTI Dynamic Registration
    analytics.py     course staff's token for the analyst view of their course
    pages.py         the HTML pages (the box, the picker, the auto-post form, a refusal)
    service.py       the pieces above built once per app
    router.py        the HTTP routes, each refusal a plain 4xx page and one log line
    cli.py           `mentor lti ...`

Nothing here imports mentor.api: the app includes `router` like any other.
"""
