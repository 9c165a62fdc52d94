// An unmodified KafkaJS group consumer (classic, eager protocol) of
// capgate's Kafka listener, authenticating over SASL OAUTHBEARER with a
// capgate client credential from its token provider hook. It prints one
// JSON line per event: records, assignments, errors. SIGTERM disconnects
// (leaving the group).
//
// env: BROKERS (comma-separated), CAPGATE_TOKEN, GROUP, TOPIC, CLIENT_ID;
// TOKEN_FILE (optional): the token is read from it at every
// authentication instead (a renewed credential written there is what the
// next re-authentication presents); REAUTH_THRESHOLD_MS (optional):
// KafkaJS re-authenticates a connection this long before its SASL
// session ends (KafkaJS's default 10000).
const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const out = (ev) => process.stdout.write(JSON.stringify({ at: Date.now() * 1e6, ...ev }) + '\n')

const kafka = new Kafka({
  clientId: process.env.CLIENT_ID,
  brokers: process.env.BROKERS.split(','),
  sasl: {
    mechanism: 'oauthbearer',
    oauthBearerProvider: async () => {
      if (!process.env.TOKEN_FILE) return { value: process.env.CAPGATE_TOKEN }
      const value = fs.readFileSync(process.env.TOKEN_FILE, 'utf8').trim()
      out({ ev: 'token' })
      return { value }
    },
  },
  ...(process.env.REAUTH_THRESHOLD_MS ? { reauthenticationThreshold: Number(process.env.REAUTH_THRESHOLD_MS) } : {}),
  logLevel: logLevel.ERROR,
  retry: { retries: 20, initialRetryTime: 100, maxRetryTime: 1000 },
})

const consumer = kafka.consumer({
  groupId: process.env.GROUP,
  sessionTimeout: 6000,
  heartbeatInterval: 100,
  maxWaitTimeInMs: 500,
})

consumer.on(consumer.events.GROUP_JOIN, (e) => {
  const ps = e.payload.memberAssignment[process.env.TOPIC] || []
  out({ ev: 'assigned', ps })
})
consumer.on(consumer.events.REBALANCING, () => out({ ev: 'rebalancing' }))
consumer.on(consumer.events.COMMIT_OFFSETS, (e) =>
  out({ ev: 'commit', ps: e.payload.topics.flatMap((t) => t.partitions.map((p) => Number(p.partition))), offs: e.payload.topics.flatMap((t) => t.partitions.map((p) => Number(p.offset))) }))
consumer.on(consumer.events.CRASH, (e) => out({ ev: 'crash', err: String(e.payload.error) }))

const run = async () => {
  await consumer.connect()
  await consumer.subscribe({ topics: [process.env.TOPIC], fromBeginning: true })
  await consumer.run({
    eachMessage: async ({ partition, message }) => {
      out({ ev: 'record', p: partition, o: Number(message.offset) })
    },
  })
}

const stop = async () => {
  try { await consumer.disconnect() } finally { process.exit(0) }
}
process.on('SIGTERM', stop)
process.on('SIGINT', stop)
run().catch((e) => { out({ ev: 'crash', err: String(e) }); process.exit(1) })
