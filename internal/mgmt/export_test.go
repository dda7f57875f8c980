package mgmt

// RPCCodes and HTTPStatus expose the error table to the docs test.
var RPCCodes = rpcCodes

func HTTPStatus(code string) int { return httpStatus(code) }

// ReadAnswer exposes the client's strict answer reader to the fuzz test.
var ReadAnswer = readAnswer
