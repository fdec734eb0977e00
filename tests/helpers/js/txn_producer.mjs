// A transactional @platformatic/kafka producer: init, begin, send, commit.
// Usage: node txn_producer.mjs BOOTSTRAP TOPIC TRANSACTIONAL_ID COUNT
// Prints one JSON line: {"ok": true, "offsets": [...]} or {"ok": false, "error": ..., "code": ...}.
// The client's InitProducerId carries producer id 0 and epoch 0 (its default), which a
// broker must accept for a transactional id it has never seen.
import { Producer, stringSerializers } from '@platformatic/kafka'

const [bootstrap, topic, transactionalId, countText] = process.argv.slice(2)
const count = Number(countText)

const producer = new Producer({
  clientId: 'logserver-txn-test',
  bootstrapBrokers: bootstrap.split(','),
  serializers: stringSerializers,
  idempotent: true,
  transactionalId,
  retries: 0
})

function describe (error) {
  const inner = (error.errors || []).map(describe)
  return { message: String(error.message), code: error.code, apiCode: error.apiCode, inner }
}

try {
  const transaction = await producer.beginTransaction()
  const messages = []
  for (let i = 0; i < count; i++) {
    messages.push({ topic, key: `k${i}`, value: `v${i}`, partition: 0 })
  }
  const result = await transaction.send({ messages })
  await transaction.commit()
  console.log(JSON.stringify({ ok: true, offsets: (result.offsets || []).map(o => ({ ...o, offset: String(o.offset) })) }))
} catch (error) {
  console.log(JSON.stringify({ ok: false, error: describe(error) }))
  process.exitCode = 1
} finally {
  await producer.close()
}
