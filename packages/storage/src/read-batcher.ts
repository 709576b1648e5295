/**
 * Reads by key gathered for one turn of the event loop and answered by one query (ADR 0005): under
 * load, many requests ask for rows at once, and one round trip for all of them costs the database
 * and this process about what one of them did. Only reads not yet sent are gathered, never a read
 * already on its way, so every answer comes from a query sent after its request arrived: nothing a
 * request could not have seen on its own.
 */
export class ReadBatcher<K, V> {
  private pending = new Map<K, { resolve: (value: V | undefined) => void; reject: (err: unknown) => void }[]>();
  private scheduled = false;

  /**
   * @param readMany answers the rows of the given distinct keys, by key; a key it leaves out has none
   * @param maxBatch the most keys one query takes; more are sent as further queries
   */
  constructor(
    private readonly readMany: (keys: K[]) => Promise<Map<K, V>>,
    private readonly maxBatch = 100,
  ) {}

  load(key: K): Promise<V | undefined> {
    return new Promise((resolve, reject) => {
      const waiting = this.pending.get(key);
      if (waiting) waiting.push({ resolve, reject });
      else this.pending.set(key, [{ resolve, reject }]);
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    const batch = this.pending;
    this.pending = new Map();
    this.scheduled = false;
    const keys = [...batch.keys()];
    for (let at = 0; at < keys.length; at += this.maxBatch) {
      const slice = keys.slice(at, at + this.maxBatch);
      this.readMany(slice).then(
        (rows) => {
          for (const key of slice) for (const waiter of batch.get(key)!) waiter.resolve(rows.get(key));
        },
        (err: unknown) => {
          for (const key of slice) for (const waiter of batch.get(key)!) waiter.reject(err);
        },
      );
    }
  }
}
