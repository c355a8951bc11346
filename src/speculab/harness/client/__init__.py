"""The client: one request function per endpoint kind, socket read times, the endpoint probe, token counting.

It knows nothing about load, results on disk or statistics: one request in, one `RequestRecord` out.
"""
