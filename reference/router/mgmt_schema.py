"""The management schema of qdrouterd 1.19 for the entity types the reference router manages.

Taken from qdrouterd 1.19's `qdrouter.json` (share/doc/qpid-dispatch/qdrouter.json of its install tree): for each
type, its base types, the operations the schema allows on it (its own and its bases'), and its attribute names
(its own, then its bases'), in the schema's order. Data only; reference/router/management.py answers with it.
"""

PREFIX = "org.apache.qpid.dispatch."

# type (without PREFIX) -> (base types, operations, attribute names)
SCHEMA: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    'entity': (
        (),
        (),
        ('name', 'identity', 'type'),
    ),
    'configurationEntity': (
        ('entity',),
        ('READ',),
        ('name', 'identity', 'type'),
    ),
    'operationalEntity': (
        ('entity',),
        ('READ',),
        ('name', 'identity', 'type'),
    ),
    'org.amqp.management': (
        ('operationalEntity', 'entity'),
        ('QUERY', 'GET-TYPES', 'GET-ANNOTATIONS', 'GET-OPERATIONS', 'GET-ATTRIBUTES', 'GET-MGMT-NODES', 'READ'),
        ('name', 'identity', 'type'),
    ),
    'management': (
        ('org.amqp.management', 'operationalEntity', 'entity'),
        ('GET-SCHEMA', 'GET-JSON-SCHEMA', 'GET-LOG', 'PROFILE', 'QUERY', 'GET-TYPES', 'GET-ANNOTATIONS',
         'GET-OPERATIONS', 'GET-ATTRIBUTES', 'GET-MGMT-NODES', 'READ'),
        ('name', 'identity', 'type'),
    ),
    'router': (
        ('configurationEntity', 'entity'),
        ('READ',),
        ('id', 'mode', 'area', 'version', 'hostName', 'helloIntervalSeconds', 'helloMaxAgeSeconds',
         'raIntervalSeconds', 'raIntervalFluxSeconds', 'remoteLsMaxAgeSeconds', 'workerThreads', 'debugDumpFile',
         'saslConfigDir', 'saslConfigName', 'allowResumableLinkRoute', 'timestampsInUTC', 'timestampFormat',
         'allowUnsettledMulticast', 'defaultDistribution', 'metadata', 'addrCount', 'linkCount', 'blockedLinkCount',
         'nodeCount', 'linkRouteCount', 'autoLinkCount', 'connectionCount', 'presettledDeliveries',
         'droppedPresettledDeliveries', 'acceptedDeliveries', 'rejectedDeliveries', 'releasedDeliveries',
         'modifiedDeliveries', 'deliveriesDelayed1Sec', 'deliveriesDelayed10Sec', 'deliveriesStuck',
         'deliveriesIngress', 'deliveriesEgress', 'deliveriesTransit', 'deliveriesIngressRouteContainer',
         'deliveriesEgressRouteContainer', 'deliveriesRedirectedToFallback', 'uptimeSeconds', 'memoryUsage', 'name',
         'identity', 'type'),
    ),
    'connection': (
        ('operationalEntity', 'entity'),
        ('READ',),
        ('adminStatus', 'operStatus', 'protocol', 'container', 'opened', 'host', 'dir', 'role', 'isAuthenticated',
         'isEncrypted', 'enableProtocolTrace', 'sasl', 'user', 'ssl', 'sslProto', 'sslCipher', 'sslSsf', 'tenant',
         'uptimeSeconds', 'properties', 'lastDlvSeconds', 'name', 'identity', 'type'),
    ),
    'router.link': (
        ('operationalEntity', 'entity'),
        ('UPDATE', 'READ'),
        ('adminStatus', 'operStatus', 'linkName', 'linkType', 'linkDir', 'owningAddr', 'capacity', 'peer',
         'undeliveredCount', 'unsettledCount', 'deliveryCount', 'presettledCount', 'droppedPresettledCount',
         'acceptedCount', 'rejectedCount', 'releasedCount', 'modifiedCount', 'deliveriesDelayed1Sec',
         'deliveriesDelayed10Sec', 'deliveriesStuck', 'creditAvailable', 'zeroCreditSeconds', 'settleRate',
         'ingressHistogram', 'priority', 'name', 'identity', 'type'),
    ),
    'router.address': (
        ('operationalEntity', 'entity'),
        ('READ',),
        ('distribution', 'inProcess', 'subscriberCount', 'remoteCount', 'containerCount', 'deliveriesIngress',
         'deliveriesEgress', 'deliveriesTransit', 'deliveriesToContainer', 'deliveriesFromContainer',
         'deliveriesIngressRouteContainer', 'deliveriesEgressRouteContainer', 'deliveriesRedirectedToFallback', 'key',
         'remoteHostRouters', 'transitOutstanding', 'trackedDeliveries', 'priority', 'name', 'identity', 'type'),
    ),
    'router.node': (
        ('operationalEntity', 'entity'),
        ('READ',),
        ('id', 'protocolVersion', 'instance', 'linkState', 'nextHop', 'validOrigins', 'address', 'routerLink', 'cost',
         'lastTopoChange', 'index', 'name', 'identity', 'type'),
    ),
    'router.config.linkRoute': (
        ('configurationEntity', 'entity'),
        ('CREATE', 'DELETE', 'READ'),
        ('prefix', 'pattern', 'addExternalPrefix', 'delExternalPrefix', 'containerId', 'connection', 'distribution',
         'direction', 'operStatus', 'name', 'identity', 'type'),
    ),
    'router.config.autoLink': (
        ('configurationEntity', 'entity'),
        ('CREATE', 'DELETE', 'READ'),
        ('address', 'direction', 'phase', 'containerId', 'connection', 'externalAddress', 'fallback', 'linkRef',
         'operStatus', 'lastError', 'name', 'identity', 'type'),
    ),
    'router.config.address': (
        ('configurationEntity', 'entity'),
        ('CREATE', 'DELETE', 'READ'),
        ('prefix', 'pattern', 'distribution', 'waypoint', 'ingressPhase', 'egressPhase', 'priority', 'enableFallback',
         'name', 'identity', 'type'),
    ),
    'listener': (
        ('configurationEntity', 'entity'),
        ('CREATE', 'DELETE', 'READ'),
        ('host', 'port', 'socketAddressFamily', 'role', 'cost', 'sslProfile', 'saslMechanisms', 'authenticatePeer',
         'saslPlugin', 'requireEncryption', 'requireSsl', 'trustedCertsFile', 'maxFrameSize', 'maxSessions',
         'maxSessionFrames', 'idleTimeoutSeconds', 'initialHandshakeTimeoutSeconds', 'stripAnnotations',
         'linkCapacity', 'multiTenant', 'failoverUrls', 'healthz', 'metrics', 'websockets', 'http', 'httpRootDir',
         'messageLoggingComponents', 'policyVhost', 'openProperties', 'name', 'identity', 'type'),
    ),
    'connector': (
        ('configurationEntity', 'entity'),
        ('CREATE', 'DELETE', 'READ'),
        ('host', 'port', 'protocolFamily', 'role', 'cost', 'sslProfile', 'saslMechanisms', 'allowRedirect',
         'maxFrameSize', 'maxSessions', 'maxSessionFrames', 'idleTimeoutSeconds', 'stripAnnotations', 'linkCapacity',
         'verifyHostname', 'saslUsername', 'saslPassword', 'messageLoggingComponents', 'failoverUrls',
         'connectionStatus', 'connectionMsg', 'policyVhost', 'openProperties', 'name', 'identity', 'type'),
    ),
    'sslProfile': (
        ('configurationEntity', 'entity'),
        ('CREATE', 'DELETE', 'READ'),
        ('ciphers', 'protocols', 'caCertFile', 'certFile', 'privateKeyFile', 'passwordFile', 'password', 'uidFormat',
         'uidNameMappingFile', 'name', 'identity', 'type'),
    ),
    'log': (
        ('configurationEntity', 'entity'),
        ('UPDATE', 'READ'),
        ('module', 'enable', 'includeTimestamp', 'includeSource', 'outputFile', 'name', 'identity', 'type'),
    ),
}
