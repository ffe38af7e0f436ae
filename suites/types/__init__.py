"""Type interop: every AMQP 1.0 type sent by one client stack, through a peer, received by another."""
