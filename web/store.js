// The last complete checkpoint, kept in IndexedDB so that it outlives the tab. One record, replaced in one
// transaction: a tab closed mid-save aborts the transaction and the previous record stays whole.
const DB = 'edgetrain', STORE = 'checkpoints', KEY = 'last';

function open() {
  return new Promise((resolve, reject) => {
    const r = indexedDB.open(DB, 1);
    r.onupgradeneeded = () => r.result.createObjectStore(STORE);
    r.onsuccess = () => resolve(r.result);
    r.onerror = () => reject(r.error);
  });
}

// record: {preset, step, steps, valLoss, savedAt, checkpoint: Uint8Array, corpusName, corpus: Uint8Array|null}
export async function saveCheckpoint(record) {
  const db = await open();
  try {
    await new Promise((resolve, reject) => {
      const tx = db.transaction(STORE, 'readwrite');
      tx.objectStore(STORE).put(record, KEY);
      tx.oncomplete = resolve;
      tx.onabort = tx.onerror = () => reject(tx.error || new Error('the save was aborted'));
    });
  } finally {
    db.close();
  }
}

export async function loadCheckpoint() {
  const db = await open();
  try {
    return await new Promise((resolve, reject) => {
      const r = db.transaction(STORE).objectStore(STORE).get(KEY);
      r.onsuccess = () => resolve(r.result || null);
      r.onerror = () => reject(r.error);
    });
  } finally {
    db.close();
  }
}
