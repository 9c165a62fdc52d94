// KafkaJS's admin client, unmodified, reading groups through capgate's
// Kafka listener as a lag exporter would: admin.listGroups(), then
// admin.describeGroups([g]) for each of GROUPS, with SASL PLAIN (the
// token as the password). It prints one JSON line per answer:
// {"ev":"list","groups":[{groupId,protocolType}]},
// {"ev":"describe","group":g,"state":…,"members":[{memberId,clientId,
// clientHost,topics,assignment}]} (subscription and assignment decoded
// as Kafka's consumer protocol) or {"ev":"error","group":g,"type":…}
// (KafkaJS's error type, e.g. GROUP_AUTHORIZATION_FAILED), then
// admin.fetchOffsets({groupId: g, topics: [TOPIC]}) as
// {"ev":"offsets","group":g,"partitions":[{partition,offset}]} or an error
// line with "op":"offsets"; and exits 0.
//
// With WRITES=1 it instead tries the admin writes the listener does not
// serve (createTopics, deleteTopics, createPartitions, deleteTopicRecords,
// deleteGroups, describeConfigs, alterConfigs, describeAcls, createAcls,
// alterPartitionReassignments, listPartitionReassignments)
// and prints one line each: {"ev":"write","op":…,"ms":…} with the error's
// "name", "err" and Kafka error "type", or "ok":true if one succeeded.
//
// env: BROKERS (comma-separated), CAPGATE_TOKEN, GROUPS (comma-separated), TOPIC, WRITES
const { Kafka, logLevel, AssignerProtocol, ConfigResourceTypes, AclResourceTypes, AclOperationTypes, AclPermissionTypes, ResourcePatternTypes } = require('kafkajs')

const out = (ev) => process.stdout.write(JSON.stringify(ev) + '\n')
const errorType = (e) => String(e.type || (e.cause && e.cause.type) || e.name)

const kafka = new Kafka({
  clientId: 'kafkajs-admin',
  brokers: process.env.BROKERS.split(','),
  sasl: { mechanism: 'plain', username: 'capgate', password: process.env.CAPGATE_TOKEN },
  logLevel: logLevel.NOTHING,
  retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 500 },
})

const describe = async (admin, group) => {
  try {
    const { groups: [g] } = await admin.describeGroups([group])
    out({
      ev: 'describe', group, state: g.state, protocolType: g.protocolType, error: g.errorCode,
      members: g.members.map((m) => {
        const meta = m.memberMetadata.length ? AssignerProtocol.MemberMetadata.decode(m.memberMetadata) : null
        const a = m.memberAssignment.length ? AssignerProtocol.MemberAssignment.decode(m.memberAssignment) : null
        return {
          memberId: m.memberId, clientId: m.clientId, clientHost: m.clientHost,
          topics: meta ? meta.topics : null, assignment: a ? a.assignment : null,
        }
      }),
    })
  } catch (e) {
    out({ ev: 'error', group, type: errorType(e), err: String(e) })
  }
}

const offsets = async (admin, group) => {
  try {
    const topics = await admin.fetchOffsets({ groupId: group, topics: [process.env.TOPIC] })
    const partitions = topics.flatMap((t) => t.partitions.map((p) => ({ partition: p.partition, offset: Number(p.offset) })))
    out({ ev: 'offsets', group, partitions })
  } catch (e) {
    out({ ev: 'error', op: 'offsets', group, type: errorType(e), err: String(e) })
  }
}

// kafkaType is the Kafka error code's name behind a KafkaJS error: its
// own, a topic's in an aggregate (createTopics), a partition's in a
// deleteTopicRecords error, a group's in a deleteGroups error, or its
// cause's; "" when none.
const kafkaType = (e) => {
  if (!e) return ''
  if (e.type) return String(e.type)
  if (e.errors && e.errors.length) return kafkaType(e.errors[0])
  if (e.partitions && e.partitions.length) return kafkaType(e.partitions[0].error)
  if (e.groups && e.groups.length) return kafkaType(e.groups[0].error)
  return kafkaType(e.cause)
}

const writes = async (admin) => {
  const topic = process.env.TOPIC
  const acl = {
    resourceType: AclResourceTypes.TOPIC, resourceName: topic, resourcePatternType: ResourcePatternTypes.LITERAL,
    principal: 'User:*', host: '*', operation: AclOperationTypes.ALL, permissionType: AclPermissionTypes.ALLOW,
  }
  const ops = {
    createTopics: () => admin.createTopics({ topics: [{ topic: 'created-through-capgate' }] }),
    deleteTopics: () => admin.deleteTopics({ topics: [topic] }),
    createPartitions: () => admin.createPartitions({ topicPartitions: [{ topic, count: 8 }] }),
    deleteTopicRecords: () => admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: '1' }] }),
    deleteGroups: () => admin.deleteGroups(['a-orders']),
    describeConfigs: () => admin.describeConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name: topic }], includeSynonyms: false }),
    alterConfigs: () => admin.alterConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configEntries: [{ name: 'retention.ms', value: '1000' }] }] }),
    describeAcls: () => admin.describeAcls({ ...acl, resourceType: AclResourceTypes.ANY, resourcePatternType: ResourcePatternTypes.ANY, operation: AclOperationTypes.ANY, permissionType: AclPermissionTypes.ANY }),
    createAcls: () => admin.createAcls({ acl: [acl] }),
    alterPartitionReassignments: () => admin.alterPartitionReassignments({ topics: [{ topic, partitionAssignment: [{ partition: 0, replicas: [0] }] }] }),
    listPartitionReassignments: () => admin.listPartitionReassignments({ topics: [{ topic, partitions: [0] }] }),
  }
  for (const [op, call] of Object.entries(ops)) {
    const start = Date.now()
    try {
      await call()
      out({ ev: 'write', op, ok: true, ms: Date.now() - start })
    } catch (e) {
      out({ ev: 'write', op, ms: Date.now() - start, name: String(e.name), err: String(e), type: kafkaType(e) })
    }
  }
}

const run = async () => {
  const admin = kafka.admin()
  await admin.connect()
  if (process.env.WRITES) {
    try {
      await writes(admin)
    } finally {
      await admin.disconnect()
    }
    return
  }
  try {
    try {
      const { groups } = await admin.listGroups()
      out({ ev: 'list', groups })
    } catch (e) {
      out({ ev: 'error', group: '', type: errorType(e), err: String(e) })
    }
    for (const group of (process.env.GROUPS || '').split(',').filter(Boolean)) {
      await describe(admin, group)
      await offsets(admin, group)
    }
  } finally {
    await admin.disconnect()
  }
}

run().catch((e) => { out({ ev: 'error', group: '', type: errorType(e), err: String(e) }); process.exit(0) })
