"""Security suites (issue 20): SASL, TLS and inter-router TLS on routers (test_router_*.py), authentication,
permissions and TLS on brokers (test_broker_*.py)."""
