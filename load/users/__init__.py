"""The gevent side: Locust users, their connections, what they report.

Never imported by the orchestrator (Locust patches the standard library).
"""
