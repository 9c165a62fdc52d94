// KafkaJS's admin offset reset, unmodified, through capgate's Kafka
// listener: admin.resetOffsets({groupId: GROUP, topic: TOPIC, earliest:
// true}) (a commit of KafkaJS's earliest sentinel, -2, on every
// partition), or with OFFSET set admin.setOffsets to that offset on
// every partition, with SASL PLAIN (the token as the password). It
// prints one JSON line per KafkaJS log line at error level
// ({"ev":"log","message":…,"error":…}) and one for the call:
// {"ev":"reset","ok":true} or {"ev":"reset","type":…,"err":…} (KafkaJS's
// error type, e.g. POLICY_VIOLATION), or {"ev":"reset","hung":true} when
// it neither resolved nor rejected within TIMEOUT_MS; then exits 0.
//
// env: BROKERS (comma-separated), CAPGATE_TOKEN, GROUP, TOPIC, OFFSET, TIMEOUT_MS
const { Kafka, logLevel } = require('kafkajs')

const out = (ev) => process.stdout.write(JSON.stringify(ev) + '\n')
const errorType = (e) => String(e.type || (e.cause && e.cause.type) || e.name)

const kafka = new Kafka({
  clientId: 'kafkajs-reset',
  brokers: process.env.BROKERS.split(','),
  sasl: { mechanism: 'plain', username: 'capgate', password: process.env.CAPGATE_TOKEN },
  logLevel: logLevel.ERROR,
  logCreator: () => ({ level, log }) => {
    if (level <= logLevel.ERROR) out({ ev: 'log', namespace: log.namespace, message: log.message, error: log.error })
  },
  retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 500 },
})

const run = async () => {
  const admin = kafka.admin()
  await admin.connect()
  const groupId = process.env.GROUP
  const topic = process.env.TOPIC
  let call
  if (process.env.OFFSET) {
    const { partitions } = (await admin.fetchTopicMetadata({ topics: [topic] })).topics[0]
    call = admin.setOffsets({ groupId, topic, partitions: partitions.map((p) => ({ partition: p.partitionId, offset: process.env.OFFSET })) })
  } else {
    call = admin.resetOffsets({ groupId, topic, earliest: true })
  }
  let timer
  const hung = new Promise((resolve) => { timer = setTimeout(() => resolve('hung'), Number(process.env.TIMEOUT_MS || 15000)) })
  try {
    const r = await Promise.race([call, hung])
    out(r === 'hung' ? { ev: 'reset', hung: true } : { ev: 'reset', ok: true })
  } catch (e) {
    out({ ev: 'reset', type: errorType(e), err: String(e) })
  } finally {
    clearTimeout(timer)
    await admin.disconnect().catch(() => {})
  }
}

run().catch((e) => { out({ ev: 'reset', type: errorType(e), err: String(e) }) }).finally(() => process.exit(0))
