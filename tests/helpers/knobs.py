"""
The test knobs (etc/mailsvc.conf's "Tests only" settings) the tests' nodes take, as environment
names: the shared ``config`` fixture, the modules with a ``config`` of their own that sign in, and
the nodes started as processes (tests/conftest.py puts them in the environment they inherit).
"""

#: Dashboard and console passwords hashed with argon2id's cheapest parameters
#: (``security.test_cheap_password_hashes``): a sign-in or a set password costs microseconds, not
#: the default's tenth of a second (a second and more on a loaded machine). What is hashed, checked
#: and refused is the same; tests/integration/test_dashboard.py checks the default is off.
NODE = {"MAILSVC_SECURITY_TEST_CHEAP_PASSWORD_HASHES": "true"}
