"""What both servers (the reference engine and the mock) stand on: connection bounds under abusive clients, precise
pacing, log limits. It knows neither server, nor the harness, nor the wire format's schemas.
"""
