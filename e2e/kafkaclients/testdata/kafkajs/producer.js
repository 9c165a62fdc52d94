// An unmodified KafkaJS producer of capgate's Kafka listener, as
// redteam2 G wrote with a consumer's client credential: SASL PLAIN with
// the token as the password, one record to TOPIC/PARTITION, acks all. It
// prints one JSON line: {"ev":"sent","offset":…} or {"ev":"error","type":…}
// (KafkaJS's error type, e.g. TOPIC_AUTHORIZATION_FAILED), and exits 0
// either way.
//
// env: BROKERS (comma-separated), CAPGATE_TOKEN, TOPIC, PARTITION;
// optional: COMPRESSION=gzip (KafkaJS's one built-in codec), IDEMPOTENT=1
// (an idempotent producer: InitProducerId, one request in flight),
// TRANSACTIONAL_ID (the record sent in a transaction, committed).
const { Kafka, logLevel, CompressionTypes } = require('kafkajs')

const out = (ev) => process.stdout.write(JSON.stringify(ev) + '\n')

const kafka = new Kafka({
  clientId: 'kafkajs-producer',
  brokers: process.env.BROKERS.split(','),
  sasl: { mechanism: 'plain', username: 'capgate', password: process.env.CAPGATE_TOKEN },
  logLevel: logLevel.NOTHING,
  retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 500 },
})

const run = async () => {
  const tx = process.env.TRANSACTIONAL_ID
  const producer = kafka.producer({
    allowAutoTopicCreation: false,
    ...(process.env.IDEMPOTENT || tx ? { idempotent: true, maxInFlightRequests: 1 } : {}),
    ...(tx ? { transactionalId: tx } : {}),
  })
  await producer.connect()
  try {
    const record = {
      topic: process.env.TOPIC, acks: -1,
      compression: process.env.COMPRESSION === 'gzip' ? CompressionTypes.GZIP : CompressionTypes.None,
      messages: [{ partition: Number(process.env.PARTITION), value: 'x' }],
    }
    let r
    if (tx) {
      const t = await producer.transaction()
      ;[r] = await t.send(record)
      await t.commit()
    } else {
      ;[r] = await producer.send(record)
    }
    out({ ev: 'sent', offset: Number(r.baseOffset) })
  } catch (e) {
    out({ ev: 'error', type: String(e.type || (e.cause && e.cause.type) || e.name), err: String(e) })
  } finally {
    await producer.disconnect()
  }
}

run().catch((e) => { out({ ev: 'error', type: String(e.type || e.name), err: String(e) }); process.exit(0) })
