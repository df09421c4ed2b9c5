// Shared by the peer clients: record each step's outcome (a value, or the error it threw)
// under a key of one JSON object, so a failing step never hides the ones after it.
export function outcomes() {
  const out = {};
  const settle = async (key, fn) => {
    try {
      out[key] = await fn();
    } catch (error) {
      out[key] = { error: String(error?.message ?? error), code: error?.code };
    }
  };
  return { out, settle };
}
